// The session and its loop: the mount, libfuse's multi-threaded loop on a
// thread of its own, and the teardown once the kernel closes the connection
// (the invalidation thread stopped, the session destroyed under the `alive`
// lock every reply holds, the fast path's tables cleared, OP_ENDED posted to
// JavaScript and the request queue released).

#include "knowledgefs_fuse.h"

struct session g = {.state = IDLE};

/* Replies take it shared; the session's teardown takes it exclusive. */
static pthread_rwlock_t alive = PTHREAD_RWLOCK_INITIALIZER;
static pthread_t session_thread;
/* Mounted by session_mount, served by session_start. */
static struct fuse_session *pending;

const char *session_mount(const char *mountpoint, const char *options) {
  char *fargv[] = {"knowledgefs", "-o", (char *)options, NULL};
  struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
  struct fuse_session *se = fuse_session_new(&args, &knowledgefs_ops, sizeof knowledgefs_ops, NULL);
  if (se == NULL) return "cannot create the FUSE session (bad mount options?)";
  if (fuse_session_mount(se, mountpoint) != 0) {
    fuse_session_destroy(se);
    return "cannot mount (see the message above from libfuse)";
  }
  pending = se;
  return NULL;
}

void session_abandon(void) {
  fuse_session_unmount(pending);
  fuse_session_destroy(pending);
  pending = NULL;
}

static void *session_main(void *arg) {
  (void)arg;
  /* Idle threads stay (up to 10): a burst of opens would otherwise create and end threads. */
  struct fuse_loop_config cfg = {.clone_fd = 0, .max_idle_threads = 10};
  fuse_session_loop_mt(g.se, &cfg);
  inval_stop();
  pthread_rwlock_wrlock(&alive);
  g.state = ENDED;
  fuse_session_unmount(g.se);
  fuse_session_destroy(g.se);
  g.se = NULL;
  pthread_rwlock_unlock(&alive);
  fast_clear();
  message_t *m = calloc(1, sizeof *m);
  if (m != NULL) {
    m->op = OP_ENDED;
    post(m);
  }
  napi_release_threadsafe_function(g.tsfn, napi_tsfn_release);
  return NULL;
}

const char *session_start(napi_threadsafe_function tsfn) {
  g.se = pending;
  pending = NULL;
  g.tsfn = tsfn;
  g.state = RUNNING;
  if (inval_start() != 0 || pthread_create(&session_thread, NULL, session_main, NULL) != 0) {
    /* Not reached in practice; the mount is left for the caller's forced unmount. */
    return "knowledgefs_fuse: cannot start threads";
  }
  pthread_detach(session_thread);
  return NULL;
}

void session_unmount(void) {
  if (begin_reply()) {
    fuse_session_exit(g.se);
    fuse_session_unmount(g.se);
    end_reply();
  }
}

int begin_reply(void) {
  pthread_rwlock_rdlock(&alive);
  if (g.state == RUNNING) return 1;
  pthread_rwlock_unlock(&alive);
  return 0;
}

void end_reply(void) { pthread_rwlock_unlock(&alive); }
