// `knowledgefs mount-helper MOUNTPOINT --user U -- COMMAND…`: the privileged
// step of an unprivileged mount (daemon/mount-helper.ts). Runs as root,
// mounts MOUNTPOINT on a fresh /dev/fuse descriptor and runs COMMAND (the
// daemon: `knowledgefs mount MOUNTPOINT --fuse-fd 3 …`) as user U with no
// capabilities, the descriptor as its fd 3. Its exit code is the daemon's;
// the mount is detached when the daemon exits or on SIGTERM/SIGINT.

import { Option, type Command } from 'commander';
import { resolve } from 'node:path';
import { resolveGroup } from '../../daemon/group.js';
import { HANDED_FUSE_FD, runMountHelper } from '../../daemon/mount-helper.js';
import { resolveRunAsUser, type RunAsUser } from '../../daemon/run-as-user.js';
import type { CliContext, CommandResult } from '../context.js';
import { optionParser } from '../option-parser.js';

interface MountHelperFlags {
  user: RunAsUser;
  allowOther?: boolean;
  group?: number;
  socket?: string;
}

export function registerMountHelper(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('mount-helper')
    .description('The privileged step of an unprivileged mount: as root, mount <mountpoint> on /dev/fuse and run the daemon command as --user with no capabilities, the FUSE descriptor as its fd 3.')
    .argument('<mountpoint>', 'directory to mount on (created when missing)')
    .argument('<command...>', `the daemon, after \`--\`: knowledgefs mount <mountpoint> --fuse-fd ${HANDED_FUSE_FD} --server URL --token-file FILE …`)
    .addOption(new Option('--user <name|uid[:group|gid]>', 'run the daemon as this user (its primary group unless given); it owns the mount').argParser(optionParser(resolveRunAsUser)).makeOptionMandatory())
    .option('--allow-other', 'mount with allow_other: other users (the agent) may use the mount; give the daemon --allow-other too')
    .option('--socket <path>', "the daemon's --socket: its directory is created (or set) for --user, mode 0700, or with --group G group G and mode 2750 so that G may connect; its parent must be root's")
    .addOption(new Option('--group <name|gid>', 'mount with allow_other and default_permissions, for the daemon\'s --group G (only G reads); give the daemon the same --group').argParser(optionParser(resolveGroup)))
    .addHelpText(
      'after',
      `
The daemon needs neither CAP_SYS_ADMIN nor /dev/fuse: it serves the descriptor
it inherits. The token file must be readable by --user.

Example:
  knowledgefs mount-helper /workspace/knowledge --user kfs --group agent --socket /run/knowledgefs/kfs/control.sock -- \\
    knowledgefs mount /workspace/knowledge --fuse-fd ${HANDED_FUSE_FD} --group agent \\
      --server http://cp:7420 --token-file /run/secrets/kfs-token --socket /run/knowledgefs/kfs/control.sock
  # the agent (group agent): knowledgefs read … --daemon-user kfs --socket /run/knowledgefs/kfs/control.sock`,
    )
    .action(async (mountpoint: string, command: string[], flags: MountHelperFlags) => {
      result.code = await runMountHelper(
        {
          mountpoint: resolve(ctx.cwd, mountpoint),
          user: flags.user,
          allowOther: flags.allowOther === true || flags.group !== undefined,
          defaultPermissions: flags.group !== undefined,
          command,
          ...(flags.socket === undefined ? {} : { socketPath: resolve(ctx.cwd, flags.socket) }),
          ...(flags.group === undefined ? {} : { group: flags.group }),
        },
        { log: (line) => ctx.stderr.write(`${line}\n`), onSignal: ctx.onSignal },
        ctx.stopSignal(),
      );
    });
}
