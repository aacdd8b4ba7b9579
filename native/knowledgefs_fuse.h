// A small Node-API addon over libfuse 3's low-level API: the kernel talks in
// node ids (inodes), every reply can be sent later from the JavaScript
// thread, and the daemon can tell the kernel exactly which entries and
// directories changed (notify_inval_entry / notify_inval_inode), so entries
// and attributes can be cached for a long time without going stale.
//
// The files, one seam each (this header is what they share):
//   session.c       the session: mount, the multi-threaded loop, teardown,
//                   and the lock replies take while it is alive;
//   requests.c      what the kernel asks, copied into messages for
//                   JavaScript (and EROFS for every change), and the table of
//                   low-level operations;
//   node_table.c    the fast path's tables: servable nodes and directories by
//                   node id, each scope's grant deadline, and the fast
//                   directory handles whose listing reached JavaScript;
//   fast_path.c     the opens and releases answered on the session thread;
//   invalidation.c  the thread that sends the kernel's notifications;
//   js_module.c     the module JavaScript loads: mount, unmount, the request
//                   queue into JavaScript, invalidations and fast-path calls;
//   js_replies.c    the reply calls (entry, attr, open, data, listings…).
//
// Threads:
// - the session threads run fuse_session_loop_mt. Each request is copied into a
//   message and handed to JavaScript through a thread-safe function; the
//   session thread never waits for JavaScript, so it goes straight back to
//   reading the next request. Write-type operations are answered EROFS here.
// - JavaScript answers with the reply functions (libfuse's replies may be
//   sent from any thread).
// - the invalidation thread sends the kernel notifications queued by
//   JavaScript. A notification waits for the inode lock the kernel holds
//   while a LOOKUP or READDIR of the same directory is in flight, and that
//   request waits for JavaScript's reply: sent from the JavaScript thread, a
//   notification could wait forever. From its own thread it just waits.
//
// The fast path: an OPEN of a node JavaScript has marked servable (its
// version's bytes verified and in memory), in a scope whose grant is fresh
// (JavaScript pushes each scope's grant deadline, and drops it on a
// revocation), is answered here on the session thread, and so is the RELEASE
// of such a handle: no trip into JavaScript. Its handle is FAST_FH; a READ of
// it (the kernel's page cache missed) goes to JavaScript, which serves the
// bytes of that node id. JavaScript drops nodes from the table on every tree
// swap that replaces or removes them and when the kernel forgets them.
// Directories JavaScript opened are in the table too: their OPENDIR is
// answered here (a handle of its own, FAST_DIR_BIT), and so is the RELEASEDIR
// of a handle whose listing the kernel had cached; a READDIR of one goes to
// JavaScript, which starts the listing then, and hears its RELEASEDIR.
//
// The session loop is libfuse's multi-threaded one: the fast path answers on
// whichever thread read the request, and the others keep reading.
//
// One mount per process (the daemon mounts once). Node ids and request
// handles travel to JavaScript as doubles: user-space pointers fit in 53 bits
// on the 64-bit Linux targets this is built for. Functions shared between the
// files have external linkage but hidden visibility (-fvisibility=hidden):
// only the module's init is exported from the shared object.

#ifndef KNOWLEDGEFS_FUSE_H
#define KNOWLEDGEFS_FUSE_H

#define FUSE_USE_VERSION 34
#define NAPI_VERSION 8

#include <fuse_lowlevel.h>
#include <node_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* Request kinds, as JavaScript numbers them (src/daemon/fuse/native-addon-api.ts). */
enum op {
  OP_LOOKUP = 1,
  OP_FORGET = 2,
  OP_GETATTR = 3,
  OP_OPEN = 4,
  OP_READ = 5,
  OP_RELEASE = 6,
  OP_OPENDIR = 7,
  OP_READDIR = 8,
  OP_RELEASEDIR = 9,
  OP_STATFS = 10,
  OP_ACCESS = 11,
  OP_ENDED = 12,
  OP_READDIRPLUS = 13,
};

typedef struct message {
  int op;
  fuse_req_t req;
  fuse_ino_t ino;
  uint64_t fh;
  double a;
  double b;
  char *name;
  size_t pairs;      /* OP_FORGET: number of (ino, nlookup) pairs */
  double *forgets;   /* OP_FORGET: 2 * pairs values */
} message_t;

typedef enum { IDLE, RUNNING, ENDED } state_t;

/* ---------- session.c ---------- */

/* The one session of this process. state is written by the JavaScript thread (mount) and the teardown (under alive). */
struct session {
  state_t state;
  struct fuse_session *se;
  napi_threadsafe_function tsfn;
};
extern struct session g;

/* Creates the session and mounts it (not yet served); NULL on success, else what failed (the caller throws it). */
const char *session_mount(const char *mountpoint, const char *options);
/* Unmounts and destroys a session mounted but never started. */
void session_abandon(void);
/* Serves the mounted session: the invalidation thread and the loop, requests into `tsfn`; NULL on success. */
const char *session_start(napi_threadsafe_function tsfn);
/* Detaches the mount; the loop ends (OP_ENDED) once the kernel closes the connection. */
void session_unmount(void);
/* Replies run while the session is alive (never after its teardown freed the requests): true and held, or false. */
int begin_reply(void);
void end_reply(void);

/* ---------- requests.c ---------- */

extern const struct fuse_lowlevel_ops knowledgefs_ops;
/* Hands a message to JavaScript; when the queue is closing, answers EIO and frees it. */
void post(message_t *m);
/* A fresh message, or NULL (and ENOMEM answered). */
message_t *message(int op, fuse_req_t req, fuse_ino_t ino);
void post_number(int op, fuse_req_t req, fuse_ino_t ino, double a);
void post_sized(int op, fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void post_handle(int op, fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* ---------- node_table.c ---------- */

/* The handle of an open answered here: above every handle JavaScript allocates (< 2^31). */
#define FAST_FH ((uint64_t)1 << 40)
/* Handles of opendirs answered here: this bit and a number of their own (JavaScript keys a listing by it). */
#define FAST_DIR_BIT ((uint64_t)1 << 41)
/* The scope id of a directory in the table: no grant needed (a listing is the plan's, not an open). */
#define DIR_SCOPE UINT32_MAX

void fast_put(fuse_ino_t ino, uint32_t scope);
void fast_drop(fuse_ino_t ino);
void fast_clear(void);
void fast_grant(uint32_t scope, double until);
/* Whether an open of `scope` was answered here since the last call (and clears that). */
int fast_take_used(uint32_t scope);
/* True when directory `ino` may be opened without JavaScript. */
int fast_dir(fuse_ino_t ino);
/* True when `ino` may be opened without JavaScript: servable, and its scope's grant is fresh now. */
int fast_servable(fuse_ino_t ino);
void listed_add(uint64_t fh);
int listed_take(uint64_t fh);

/* ---------- fast_path.c ---------- */

void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* [opens, releases, opendirs, releasedirs] answered here so far. */
void fast_counts(uint64_t out[4]);

/* ---------- invalidation.c ---------- */

/* Starts the thread; 0 on success. */
int inval_start(void);
/* Stops the thread (what is left queued is dropped: the connection is gone) and waits for it. */
void inval_stop(void);
/* Queues a notification: name NULL = inval_inode(ino), else inval_entry(ino, name) (the name is taken). */
void enqueue(fuse_ino_t ino, char *name);

#endif
