// Types of scripts/node-binary.mjs, for the TypeScript tests that use it.
export declare const REPO_ROOT: string;
export declare const CACHE_DIR: string;
export declare function ensurePackedPackage(spec: string, dir: string): string;
export declare function ensureNodeBinary(major: number | string): { dir: string; bin: string; node: string; version: string };
