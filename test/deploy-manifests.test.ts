// The Kubernetes manifests under deploy/ checked without a cluster:
//   - against Kubernetes' published API schemas (the `kubernetes-models`
//     package, generated from the OpenAPI document): field types, enums and
//     required fields through its validators, and unknown fields (a typo
//     Kubernetes' strict field validation refuses) through TypeScript's
//     excess-property check against the same package's types;
//   - for the shape they promise: the agent's container has no added
//     capability, no privilege, no /dev/fuse and runs as non-root, and only the
//     mounting sidecar is privileged; the mount and the socket paths agree.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/mount.js';

const DIR = join(REPO_ROOT, 'deploy', 'kubernetes');

interface Manifest {
  readonly file: string;
  readonly doc: { apiVersion: string; kind: string; metadata?: { name?: string } } & Record<string, unknown>;
}

/** Each kind used under deploy/: the kubernetes-models module and its type. */
const MODELS: Readonly<Record<string, { module: string; name: string }>> = {
  'v1/Pod': { module: 'kubernetes-models/v1/Pod', name: 'Pod' },
  'v1/Secret': { module: 'kubernetes-models/v1/Secret', name: 'Secret' },
};

function manifests(): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(DIR).filter((f) => /\.ya?ml$/.test(f))) {
    // YAML 1.1, as Kubernetes reads manifests (0440 is octal there, `yes` a boolean).
    for (const d of parseAllDocuments(readFileSync(join(DIR, file), 'utf8'), { version: '1.1' })) {
      if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
      const doc = d.toJS() as Manifest['doc'] | null;
      if (doc !== null) out.push({ file, doc });
    }
  }
  return out;
}

const key = (m: Manifest) => `${m.doc.apiVersion}/${m.doc.kind}`;

/** TypeScript errors for `doc` as an object literal of the model's interface: excess (unknown) properties included. */
function typeErrors(all: readonly Manifest[]): string[] {
  const virtual = join(REPO_ROOT, 'test', '__deploy_manifests_check__.ts');
  const lines: string[] = [];
  all.forEach((m, i) => {
    const model = MODELS[key(m)]!;
    lines.push(`import type { I${model.name} as T${i} } from '${model.module}';`);
    lines.push(`export const m${i}: T${i} = ${JSON.stringify(m.doc, null, 1)};`);
  });
  const source = lines.join('\n');
  const options: ts.CompilerOptions = { strict: true, noEmit: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, skipLibCheck: true, types: [] };
  const host = ts.createCompilerHost(options);
  const read = host.readFile.bind(host);
  const exists = host.fileExists.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.readFile = (f) => (f === virtual ? source : read(f));
  host.fileExists = (f) => f === virtual || exists(f);
  host.getSourceFile = (f, lang, ...rest) => (f === virtual ? ts.createSourceFile(f, source, lang) : getSourceFile(f, lang, ...rest));
  const program = ts.createProgram([virtual], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file === undefined || d.start === undefined ? '' : `line ${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: `;
    return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

type Container = {
  name: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string }[];
  securityContext?: { privileged?: boolean; runAsNonRoot?: boolean; runAsUser?: number; allowPrivilegeEscalation?: boolean; capabilities?: { add?: string[]; drop?: string[] } };
  volumeMounts?: { name: string; mountPath: string; mountPropagation?: string }[];
  volumeDevices?: unknown[];
};
type PodSpec = { containers: Container[]; initContainers?: Container[]; volumes?: { name: string; hostPath?: { path: string }; secret?: unknown }[] };

describe('deploy/kubernetes manifests', () => {
  const all = manifests();

  it('are there, and of kinds checked here', () => {
    expect(all.map((m) => `${m.file}: ${key(m)}`)).toEqual(['runner-pod.yaml: v1/Secret', 'runner-pod.yaml: v1/Pod']);
  });

  it('match the published Kubernetes API schemas (types, enums, required fields)', async () => {
    for (const m of all) {
      const model = MODELS[key(m)]!;
      const Model = (await import(model.module))[model.name] as new (data: unknown) => { validate(): void };
      expect(() => new Model(m.doc).validate(), `${m.file} ${key(m)}`).not.toThrow();
    }
  });

  it('have no field the API does not know (a typo would be refused by strict field validation)', () => {
    expect(typeErrors(all)).toEqual([]);
  });

  it('the check itself: a misspelt field and a bad enum value are caught', async () => {
    const pod = all.find((m) => m.doc.kind === 'Pod')!;
    const spec = structuredClone(pod.doc.spec) as PodSpec & { containers: Record<string, unknown>[] };
    spec.containers[0]!.securityContex = {};
    const typo = typeErrors([{ ...pod, doc: { ...pod.doc, spec } }]);
    expect(typo.join('\n')).toMatch(/securityContex/);
    const { Pod } = await import('kubernetes-models/v1/Pod');
    const badEnum = structuredClone(pod.doc.spec) as PodSpec;
    badEnum.containers[0]!.volumeMounts![0]!.mountPropagation = 'Sideways';
    expect(() => new Pod({ ...pod.doc, spec: badEnum } as never).validate()).toThrow(/mountPropagation/);
  });

  const pod = all.find((m) => m.doc.kind === 'Pod')!.doc as unknown as { spec: PodSpec };
  const agent = pod.spec.containers.find((c) => c.name === 'agent')!;
  const mounter = pod.spec.initContainers!.find((c) => c.name === 'knowledgefs-mount')!;

  it("the agent's container: non-root, no privilege, no added capability (all dropped), no /dev/fuse, no token", () => {
    for (const c of pod.spec.containers) {
      expect(c.securityContext?.privileged ?? false, c.name).toBe(false);
      expect(c.securityContext?.capabilities?.add ?? [], c.name).toEqual([]);
      expect(c.volumeDevices, c.name).toBeUndefined();
    }
    expect(agent.securityContext?.runAsNonRoot).toBe(true);
    expect(agent.securityContext?.runAsUser).toBeGreaterThan(0);
    expect(agent.securityContext?.allowPrivilegeEscalation).toBe(false);
    expect(agent.securityContext?.capabilities?.drop).toEqual(['ALL']);
    expect(pod.spec.volumes?.filter((v) => v.hostPath !== undefined) ?? []).toEqual([]);
    const secretVolumes = new Set(pod.spec.volumes?.filter((v) => v.secret !== undefined).map((v) => v.name));
    expect(agent.volumeMounts?.filter((v) => secretVolumes.has(v.name)) ?? []).toEqual([]);
    expect(JSON.stringify(agent)).not.toMatch(/\/dev\/fuse|SYS_ADMIN/);
  });

  it('only the mounter is privileged, and it runs the daemon through mount-helper as the agent\'s user; paths agree', () => {
    expect(mounter.securityContext?.privileged).toBe(true);
    const script = [...(mounter.command ?? []), ...(mounter.args ?? [])].join(' ');
    const helper = /knowledgefs mount-helper (\S+) --user (\d+):(\d+) -- \\\s+knowledgefs mount (\S+) --fuse-fd 3\b/.exec(script);
    expect(helper, script).not.toBeNull();
    const [, helperPoint, uid, gid, daemonPoint] = helper!;
    expect(daemonPoint).toBe(helperPoint);
    expect(Number(uid)).toBe(agent.securityContext?.runAsUser);
    expect(Number(gid)).toBe((agent.securityContext as { runAsGroup?: number }).runAsGroup);

    // The mount reaches the agent: the same volume at the same path, Bidirectional from the privileged side.
    const volumeOf = (c: Container) => c.volumeMounts!.find((v) => helperPoint!.startsWith(`${v.mountPath}/`))!;
    expect(volumeOf(mounter).mountPropagation).toBe('Bidirectional');
    expect(volumeOf(agent).mountPropagation).toBe('HostToContainer');
    expect(volumeOf(agent).name).toBe(volumeOf(mounter).name);
    expect(volumeOf(agent).mountPath).toBe(volumeOf(mounter).mountPath);

    // The daemon's user reads the token file: group-readable, the pod's fsGroup being its group.
    const tokenFile = /--token-file (\S+)/.exec(script)?.[1];
    const tokenMount = mounter.volumeMounts!.find((v) => tokenFile!.startsWith(`${v.mountPath}/`))!;
    const tokenVolume = pod.spec.volumes!.find((v) => v.name === tokenMount.name) as { secret: { defaultMode: number } };
    expect(tokenVolume.secret.defaultMode & 0o040).toBe(0o040);
    expect(tokenVolume.secret.defaultMode & 0o007).toBe(0);
    expect((pod.spec as { securityContext?: { fsGroup?: number } }).securityContext?.fsGroup).toBe(Number(gid));

    const socket = /--socket (\S+)/.exec(script)?.[1];
    expect(agent.env?.find((e) => e.name === 'KNOWLEDGEFS_SOCKET')?.value).toBe(socket);
  });
});
