// The native binding's real-mount suites again, every mount with
// --kernel-opens on (FUSE no-open): what they promise (docs/SEMANTICS.md:
// changes reaching ls/stat/cat at once, names cached as missing appearing,
// descriptors held across edits and revocations, revocation within 1 s of
// the control plane knowing, close-to-open) must hold when the kernel opens
// cached files without asking. Each file below keeps its own tests; only the
// mount flags differ.

process.env.KNOWLEDGEFS_TEST_MOUNT_ARGS = '--kernel-opens on';
await import('./mount-native.test.js');
await import('./mount-revocation-speed.test.js');
await import('./mount-coherence.test.js');
