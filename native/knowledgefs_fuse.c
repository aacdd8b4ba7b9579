// A small Node-API addon over libfuse 3's low-level API: the kernel talks in
// node ids (inodes), every reply can be sent later from the JavaScript
// thread, and the daemon can tell the kernel exactly which entries and
// directories changed (notify_inval_entry / notify_inval_inode), so entries
// and attributes can be cached for a long time without going stale.
//
// Threads:
// - the session threads run fuse_session_loop_mt. Each request is copied into a
//   message and handed to JavaScript through a thread-safe function; the
//   session thread never waits for JavaScript, so it goes straight back to
//   reading the next request. Write-type operations are answered EROFS here.
// - JavaScript answers with the reply functions below (libfuse's replies may
//   be sent from any thread).
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
// on the 64-bit Linux targets this is built for.

#define FUSE_USE_VERSION 34
#define NAPI_VERSION 8

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <node_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

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

typedef struct notice {
  struct notice *next;
  fuse_ino_t ino;
  char *name; /* NULL: inval_inode(ino); else inval_entry(ino, name) */
} notice_t;

typedef enum { IDLE, RUNNING, ENDED } state_t;

static struct {
  state_t state;
  struct fuse_session *se;
  napi_threadsafe_function tsfn;
  pthread_t session_thread;
  /* Replies take it shared; the session's teardown takes it exclusive. */
  pthread_rwlock_t alive;
  pthread_t inval_thread;
  pthread_mutex_t queue_lock;
  pthread_cond_t queue_cond;
  notice_t *head;
  notice_t *tail;
  int inval_stop;
} g = {
    .state = IDLE,
    .alive = PTHREAD_RWLOCK_INITIALIZER,
    .queue_lock = PTHREAD_MUTEX_INITIALIZER,
    .queue_cond = PTHREAD_COND_INITIALIZER,
};

/* ---------- the fast path's tables (any session thread reads, JavaScript writes) ---------- */

/* The handle of an open answered here: above every handle JavaScript allocates (< 2^31). */
#define FAST_FH ((uint64_t)1 << 40)
/* Handles of opendirs answered here: this bit and a number of their own (JavaScript keys a listing by it). */
#define FAST_DIR_BIT ((uint64_t)1 << 41)
/* The scope id of a directory in the table: no grant needed (a listing is the plan's, not an open). */
#define DIR_SCOPE UINT32_MAX
/* Buckets of the set of fast directory handles whose READDIR reached JavaScript. */
#define LISTED_BUCKETS 256

typedef struct fast_node {
  struct fast_node *next;
  fuse_ino_t ino;
  uint32_t scope;
} fast_node_t;

static struct {
  pthread_rwlock_t lock;
  fast_node_t **buckets; /* chained by ino */
  size_t nbuckets;       /* a power of two, or 0 */
  size_t count;
  double *grant_until; /* per scope id: Date.now() milliseconds until which its grant is fresh */
  uint8_t *used;       /* per scope id: an open was answered here since JavaScript last asked (fastTakeUsed) */
  size_t nscopes;
  uint64_t opens;    /* answered here (atomic) */
  uint64_t releases; /* answered here (atomic) */
  uint64_t opendirs;    /* answered here (atomic) */
  uint64_t releasedirs; /* answered here (atomic) */
  uint64_t next_dir;    /* the number of the next fast directory handle (atomic) */
} fast = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/*
 * Fast directory handles whose listing reached JavaScript (a READDIR the
 * kernel's cache could not answer): JavaScript holds state for them, so
 * their RELEASEDIR goes to JavaScript too. Every other one is released here.
 */
typedef struct listed {
  struct listed *next;
  uint64_t fh;
} listed_t;
static struct {
  pthread_mutex_t lock;
  listed_t *buckets[LISTED_BUCKETS];
} listed = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void listed_add(uint64_t fh) {
  pthread_mutex_lock(&listed.lock);
  listed_t **b = &listed.buckets[fh % LISTED_BUCKETS];
  listed_t *e = *b;
  while (e != NULL && e->fh != fh) e = e->next;
  if (e == NULL && (e = malloc(sizeof *e)) != NULL) {
    e->fh = fh;
    e->next = *b;
    *b = e;
  }
  pthread_mutex_unlock(&listed.lock);
}

/* Removes `fh`; true if it was there. */
static int listed_take(uint64_t fh) {
  int found = 0;
  pthread_mutex_lock(&listed.lock);
  listed_t **p = &listed.buckets[fh % LISTED_BUCKETS];
  while (*p != NULL && (*p)->fh != fh) p = &(*p)->next;
  if (*p != NULL) {
    listed_t *e = *p;
    *p = e->next;
    free(e);
    found = 1;
  }
  pthread_mutex_unlock(&listed.lock);
  return found;
}

static size_t fast_slot(fuse_ino_t ino) { return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 20) & (fast.nbuckets - 1); }

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Under the write lock. */
static void fast_grow(void) {
  size_t n = fast.nbuckets == 0 ? 1024 : fast.nbuckets * 2;
  fast_node_t **b = calloc(n, sizeof *b);
  if (b == NULL) return; /* keeps the old table: only longer chains */
  size_t old = fast.nbuckets;
  fast_node_t **ob = fast.buckets;
  fast.buckets = b;
  fast.nbuckets = n;
  for (size_t i = 0; i < old; i++) {
    for (fast_node_t *e = ob[i], *next; e != NULL; e = next) {
      next = e->next;
      size_t k = fast_slot(e->ino);
      e->next = b[k];
      b[k] = e;
    }
  }
  free(ob);
}

static void fast_put(fuse_ino_t ino, uint32_t scope) {
  pthread_rwlock_wrlock(&fast.lock);
  if (fast.count >= fast.nbuckets) fast_grow();
  if (fast.nbuckets > 0) {
    size_t k = fast_slot(ino);
    fast_node_t *e = fast.buckets[k];
    while (e != NULL && e->ino != ino) e = e->next;
    if (e == NULL && (e = malloc(sizeof *e)) != NULL) {
      e->ino = ino;
      e->next = fast.buckets[k];
      fast.buckets[k] = e;
      fast.count++;
    }
    if (e != NULL) e->scope = scope;
  }
  pthread_rwlock_unlock(&fast.lock);
}

static void fast_drop(fuse_ino_t ino) {
  pthread_rwlock_wrlock(&fast.lock);
  if (fast.nbuckets > 0) {
    fast_node_t **p = &fast.buckets[fast_slot(ino)];
    while (*p != NULL && (*p)->ino != ino) p = &(*p)->next;
    if (*p != NULL) {
      fast_node_t *e = *p;
      *p = e->next;
      free(e);
      fast.count--;
    }
  }
  pthread_rwlock_unlock(&fast.lock);
}

static void fast_clear(void) {
  pthread_rwlock_wrlock(&fast.lock);
  for (size_t i = 0; i < fast.nbuckets; i++) {
    for (fast_node_t *e = fast.buckets[i], *next; e != NULL; e = next) {
      next = e->next;
      free(e);
    }
    fast.buckets[i] = NULL;
  }
  fast.count = 0;
  for (size_t i = 0; i < fast.nscopes; i++) {
    fast.grant_until[i] = 0;
    fast.used[i] = 0;
  }
  pthread_rwlock_unlock(&fast.lock);
}

static void fast_grant(uint32_t scope, double until) {
  pthread_rwlock_wrlock(&fast.lock);
  if (scope >= fast.nscopes) {
    size_t n = scope + 16;
    double *g2 = realloc(fast.grant_until, n * sizeof *g2);
    if (g2 != NULL) fast.grant_until = g2;
    uint8_t *u2 = g2 == NULL ? NULL : realloc(fast.used, n * sizeof *u2);
    if (u2 != NULL) fast.used = u2;
    if (g2 != NULL && u2 != NULL) {
      for (size_t i = fast.nscopes; i < n; i++) {
        g2[i] = 0;
        u2[i] = 0;
      }
      fast.nscopes = n;
    }
  }
  if (scope < fast.nscopes) fast.grant_until[scope] = until;
  pthread_rwlock_unlock(&fast.lock);
}

/* True when directory `ino` may be opened without JavaScript (it is in the current tree, as JavaScript said). */
static int fast_dir(fuse_ino_t ino) {
  int ok = 0;
  pthread_rwlock_rdlock(&fast.lock);
  if (fast.nbuckets > 0) {
    fast_node_t *e = fast.buckets[fast_slot(ino)];
    while (e != NULL && e->ino != ino) e = e->next;
    ok = e != NULL && e->scope == DIR_SCOPE;
  }
  pthread_rwlock_unlock(&fast.lock);
  return ok;
}

/* True when `ino` may be opened without JavaScript: servable, and its scope's grant is fresh now. */
static int fast_servable(fuse_ino_t ino) {
  int ok = 0;
  pthread_rwlock_rdlock(&fast.lock);
  if (fast.nbuckets > 0) {
    fast_node_t *e = fast.buckets[fast_slot(ino)];
    while (e != NULL && e->ino != ino) e = e->next;
    if (e != NULL && e->scope != DIR_SCOPE && e->scope < fast.nscopes) ok = now_ms() < fast.grant_until[e->scope];
    if (ok) __atomic_store_n(&fast.used[e->scope], 1, __ATOMIC_RELAXED);
  }
  pthread_rwlock_unlock(&fast.lock);
  return ok;
}

/* ---------- requests: session thread → JavaScript ---------- */

static void post(message_t *m) {
  if (napi_call_threadsafe_function(g.tsfn, m, napi_tsfn_nonblocking) != napi_ok) {
    /* Only when the function is closing: the mount is going away. */
    if (m->req != NULL) fuse_reply_err(m->req, EIO);
    free(m->name);
    free(m->forgets);
    free(m);
  }
}

static message_t *message(int op, fuse_req_t req, fuse_ino_t ino) {
  message_t *m = calloc(1, sizeof *m);
  if (m == NULL) {
    if (req != NULL) fuse_reply_err(req, ENOMEM);
    return NULL;
  }
  m->op = op;
  m->req = req;
  m->ino = ino;
  return m;
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  message_t *m = message(OP_LOOKUP, req, parent);
  if (m == NULL) return;
  m->name = strdup(name);
  if (m->name == NULL) {
    free(m);
    fuse_reply_err(req, ENOMEM);
    return;
  }
  post(m);
}

static void forget_pairs(fuse_req_t req, size_t count, const struct fuse_forget_data *list, fuse_ino_t ino, uint64_t nlookup) {
  fuse_reply_none(req);
  message_t *m = message(OP_FORGET, NULL, 0);
  if (m == NULL) return;
  m->pairs = count;
  m->forgets = malloc(sizeof(double) * 2 * count);
  if (m->forgets == NULL) {
    free(m);
    return;
  }
  for (size_t i = 0; i < count; i++) {
    m->forgets[2 * i] = (double)(list == NULL ? ino : list[i].ino);
    m->forgets[2 * i + 1] = (double)(list == NULL ? nlookup : list[i].nlookup);
  }
  post(m);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  forget_pairs(req, 1, NULL, ino, nlookup);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *list) {
  forget_pairs(req, count, list, 0, 0);
}

/* Requests with at most one number: open's flags, access's mask (0 for the others). */
static void post_number(int op, fuse_req_t req, fuse_ino_t ino, double a) {
  message_t *m = message(op, req, ino);
  if (m == NULL) return;
  m->a = a;
  post(m);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)fi;
  post_number(OP_GETATTR, req, ino, 0);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  const int write_intent = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
  if ((fi->flags & write_intent) == 0 && fast_servable(ino)) {
    fi->fh = FAST_FH;
    fi->keep_cache = 1;
    fi->noflush = 1;
    if (fuse_reply_open(req, fi) == 0) __atomic_add_fetch(&fast.opens, 1, __ATOMIC_RELAXED);
    return;
  }
  post_number(OP_OPEN, req, ino, (double)fi->flags);
}

/* READ and READDIR: a handle, a size and an offset. */
static void post_sized(int op, fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  message_t *m = message(op, req, ino);
  if (m == NULL) return;
  m->fh = fi->fh;
  m->a = (double)size;
  m->b = (double)off;
  post(m);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  post_sized(OP_READ, req, ino, size, off, fi);
}

/* RELEASE and RELEASEDIR: a handle. */
static void post_handle(int op, fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  message_t *m = message(op, req, ino);
  if (m == NULL) return;
  m->fh = fi->fh;
  post(m);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (fi->fh == FAST_FH) {
    fuse_reply_err(req, 0);
    __atomic_add_fetch(&fast.releases, 1, __ATOMIC_RELAXED);
    return;
  }
  post_handle(OP_RELEASE, req, ino, fi);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (fast_dir(ino)) {
    fi->fh = FAST_DIR_BIT | (__atomic_add_fetch(&fast.next_dir, 1, __ATOMIC_RELAXED) & 0xffffffffu);
    fi->keep_cache = 1;
    fi->cache_readdir = 1;
    if (fuse_reply_open(req, fi) == 0) __atomic_add_fetch(&fast.opendirs, 1, __ATOMIC_RELAXED);
    return;
  }
  post_number(OP_OPENDIR, req, ino, 0);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  if (fi->fh & FAST_DIR_BIT) listed_add(fi->fh);
  post_sized(OP_READDIR, req, ino, size, off, fi);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  if (fi->fh & FAST_DIR_BIT) listed_add(fi->fh);
  post_sized(OP_READDIRPLUS, req, ino, size, off, fi);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if ((fi->fh & FAST_DIR_BIT) && !listed_take(fi->fh)) {
    fuse_reply_err(req, 0);
    __atomic_add_fetch(&fast.releasedirs, 1, __ATOMIC_RELAXED);
    return;
  }
  post_handle(OP_RELEASEDIR, req, ino, fi);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino) { post_number(OP_STATFS, req, ino, 0); }

static void ll_access(fuse_req_t req, fuse_ino_t ino, int mask) { post_number(OP_ACCESS, req, ino, (double)mask); }

/* A read-only file system: every change is refused here, without JavaScript. */
static void rofs(fuse_req_t req) { fuse_reply_err(req, EROFS); }
static void ll_setattr(fuse_req_t req, fuse_ino_t i, struct stat *s, int t, struct fuse_file_info *f) { (void)i; (void)s; (void)t; (void)f; rofs(req); }
static void ll_mknod(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t d) { (void)p; (void)n; (void)m; (void)d; rofs(req); }
static void ll_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m) { (void)p; (void)n; (void)m; rofs(req); }
static void ll_unlink(fuse_req_t req, fuse_ino_t p, const char *n) { (void)p; (void)n; rofs(req); }
static void ll_symlink(fuse_req_t req, const char *l, fuse_ino_t p, const char *n) { (void)l; (void)p; (void)n; rofs(req); }
static void ll_rename(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np, const char *nn, unsigned int f) { (void)p; (void)n; (void)np; (void)nn; (void)f; rofs(req); }
static void ll_link(fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn) { (void)i; (void)np; (void)nn; rofs(req); }
static void ll_write(fuse_req_t req, fuse_ino_t i, const char *b, size_t s, off_t o, struct fuse_file_info *f) { (void)i; (void)b; (void)s; (void)o; (void)f; rofs(req); }
static void ll_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, struct fuse_file_info *f) { (void)p; (void)n; (void)m; (void)f; rofs(req); }
static void ll_setxattr(fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s, int f) { (void)i; (void)n; (void)v; (void)s; (void)f; rofs(req); }
static void ll_removexattr(fuse_req_t req, fuse_ino_t i, const char *n) { (void)i; (void)n; rofs(req); }

static void ll_init(void *userdata, struct fuse_conn_info *conn) {
  (void)userdata;
  /* Mtimes are whole milliseconds; never let the kernel invalidate pages on an mtime change (a new version is a new inode). */
  conn->time_gran = 1000000;
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

static const struct fuse_lowlevel_ops ops = {
    .init = ll_init,
    .lookup = ll_lookup,
    .forget = ll_forget,
    .forget_multi = ll_forget_multi,
    .getattr = ll_getattr,
    .open = ll_open,
    .read = ll_read,
    .release = ll_release,
    .opendir = ll_opendir,
    .readdir = ll_readdir,
    .readdirplus = ll_readdirplus,
    .releasedir = ll_releasedir,
    .statfs = ll_statfs,
    .access = ll_access,
    .setattr = ll_setattr,
    .mknod = ll_mknod,
    .mkdir = ll_mkdir,
    .unlink = ll_unlink,
    .rmdir = ll_unlink,
    .symlink = ll_symlink,
    .rename = ll_rename,
    .link = ll_link,
    .write = ll_write,
    .create = ll_create,
    .setxattr = ll_setxattr,
    .removexattr = ll_removexattr,
};

/* ---------- the invalidation thread ---------- */

static void *inval_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g.queue_lock);
    while (g.head == NULL && !g.inval_stop) pthread_cond_wait(&g.queue_cond, &g.queue_lock);
    notice_t *n = g.head;
    if (n == NULL) {
      pthread_mutex_unlock(&g.queue_lock);
      return NULL;
    }
    g.head = n->next;
    if (g.head == NULL) g.tail = NULL;
    int stopping = g.inval_stop;
    pthread_mutex_unlock(&g.queue_lock);
    /* Once stopping, the connection is gone: drop what is left. ENOENT (the kernel doesn't know that inode) is normal. */
    if (!stopping) {
      if (n->name == NULL) fuse_lowlevel_notify_inval_inode(g.se, n->ino, 0, 0);
      else fuse_lowlevel_notify_inval_entry(g.se, n->ino, n->name, strlen(n->name));
    }
    free(n->name);
    free(n);
  }
}

/* ---------- the session thread ---------- */

static void *session_main(void *arg) {
  (void)arg;
  /* Idle threads stay (up to 10): a burst of opens would otherwise create and end threads. */
  struct fuse_loop_config cfg = {.clone_fd = 0, .max_idle_threads = 10};
  fuse_session_loop_mt(g.se, &cfg);
  pthread_mutex_lock(&g.queue_lock);
  g.inval_stop = 1;
  pthread_cond_signal(&g.queue_cond);
  pthread_mutex_unlock(&g.queue_lock);
  pthread_join(g.inval_thread, NULL);
  pthread_rwlock_wrlock(&g.alive);
  g.state = ENDED;
  fuse_session_unmount(g.se);
  fuse_session_destroy(g.se);
  g.se = NULL;
  pthread_rwlock_unlock(&g.alive);
  fast_clear();
  message_t *m = calloc(1, sizeof *m);
  if (m != NULL) {
    m->op = OP_ENDED;
    post(m);
  }
  napi_release_threadsafe_function(g.tsfn, napi_tsfn_release);
  return NULL;
}

/* ---------- JavaScript side ---------- */

#define CHECK(env, call)                                              \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error((env), NULL, "knowledgefs_fuse: " #call);      \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

static void call_js(napi_env env, napi_value js_cb, void *context, void *data) {
  (void)context;
  message_t *m = data;
  if (env != NULL && js_cb != NULL) {
    napi_value argv[7];
    napi_value undefined;
    napi_get_undefined(env, &undefined);
    napi_create_int32(env, m->op, &argv[0]);
    napi_create_double(env, (double)(uintptr_t)m->req, &argv[1]);
    napi_create_double(env, (double)m->ino, &argv[2]);
    napi_create_double(env, (double)m->fh, &argv[3]);
    napi_create_double(env, m->a, &argv[4]);
    napi_create_double(env, m->b, &argv[5]);
    argv[6] = undefined;
    if (m->name != NULL) {
      napi_create_string_utf8(env, m->name, NAPI_AUTO_LENGTH, &argv[6]);
    } else if (m->forgets != NULL) {
      napi_value ab;
      void *bytes;
      size_t len = sizeof(double) * 2 * m->pairs;
      if (napi_create_arraybuffer(env, len, &bytes, &ab) == napi_ok) {
        memcpy(bytes, m->forgets, len);
        napi_create_typedarray(env, napi_float64_array, 2 * m->pairs, ab, 0, &argv[6]);
      }
    }
    napi_value result;
    if (napi_call_function(env, undefined, js_cb, 7, argv, &result) != napi_ok) {
      /* The handler catches everything it can; a throw here is a bug: surface it (no reply: it may have sent one). */
      napi_value exc;
      if (napi_get_and_clear_last_exception(env, &exc) == napi_ok) napi_fatal_exception(env, exc);
    }
  } else if (m->req != NULL) {
    fuse_reply_err(m->req, EIO);
  }
  free(m->name);
  free(m->forgets);
  free(m);
}

static int get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
    napi_throw_type_error(env, NULL, "knowledgefs_fuse: missing arguments");
    return 0;
  }
  return 1;
}

static double num(napi_env env, napi_value v) {
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}

static fuse_req_t req_of(napi_env env, napi_value v) { return (fuse_req_t)(uintptr_t)num(env, v); }

/* Replies run while the session is alive (never after its teardown freed the requests). */
static int begin_reply(void) {
  pthread_rwlock_rdlock(&g.alive);
  if (g.state == RUNNING) return 1;
  pthread_rwlock_unlock(&g.alive);
  return 0;
}
static void end_reply(void) { pthread_rwlock_unlock(&g.alive); }

/* Sends one reply, or nothing once the session has ended. */
#define REPLY(call)      \
  do {                   \
    if (begin_reply()) { \
      call;              \
      end_reply();       \
    }                    \
  } while (0)

/* mount(mountpoint, options, handler): options is a -o string (fsname=…,allow_other,…). */
static napi_value js_mount(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (!get_args(env, info, 3, argv)) return NULL;
  if (g.state == RUNNING) {
    napi_throw_error(env, NULL, "knowledgefs_fuse: this process already has a mount");
    return NULL;
  }
  char mountpoint[4096];
  char options[4096];
  size_t len;
  CHECK(env, napi_get_value_string_utf8(env, argv[0], mountpoint, sizeof mountpoint, &len));
  CHECK(env, napi_get_value_string_utf8(env, argv[1], options, sizeof options, &len));
  if (len >= sizeof options - 1) {
    napi_throw_range_error(env, NULL, "knowledgefs_fuse: mount options too long");
    return NULL;
  }
  char *fargv[] = {"knowledgefs", "-o", options, NULL};
  struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
  struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
  if (se == NULL) {
    napi_throw_error(env, NULL, "cannot create the FUSE session (bad mount options?)");
    return NULL;
  }
  if (fuse_session_mount(se, mountpoint) != 0) {
    fuse_session_destroy(se);
    napi_throw_error(env, NULL, "cannot mount (see the message above from libfuse)");
    return NULL;
  }
  napi_value name;
  CHECK(env, napi_create_string_utf8(env, "knowledgefs-fuse", NAPI_AUTO_LENGTH, &name));
  if (napi_create_threadsafe_function(env, argv[2], NULL, name, 0, 1, NULL, NULL, NULL, call_js, &g.tsfn) != napi_ok) {
    fuse_session_unmount(se);
    fuse_session_destroy(se);
    napi_throw_error(env, NULL, "knowledgefs_fuse: cannot create the request queue");
    return NULL;
  }
  g.se = se;
  g.head = g.tail = NULL;
  g.inval_stop = 0;
  g.state = RUNNING;
  if (pthread_create(&g.inval_thread, NULL, inval_main, NULL) != 0 ||
      pthread_create(&g.session_thread, NULL, session_main, NULL) != 0) {
    /* Not reached in practice; the mount is left for the caller's forced unmount. */
    napi_throw_error(env, NULL, "knowledgefs_fuse: cannot start threads");
    return NULL;
  }
  pthread_detach(g.session_thread);
  return NULL;
}

/* unmount(): detaches the mount; the session ends (OP_ENDED) once the kernel closes the connection. */
static napi_value js_unmount(napi_env env, napi_callback_info info) {
  (void)info;
  if (begin_reply()) {
    fuse_session_exit(g.se);
    fuse_session_unmount(g.se);
    end_reply();
  }
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  return undefined;
}

/* unref(): the pending session no longer keeps the process alive (a reader still holds a file after the unmount). */
static napi_value js_unref(napi_env env, napi_callback_info info) {
  (void)info;
  if (g.state == RUNNING) napi_unref_threadsafe_function(env, g.tsfn);
  return NULL;
}

static napi_value js_reply_err(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!get_args(env, info, 2, argv)) return NULL;
  REPLY(fuse_reply_err(req_of(env, argv[0]), (int)num(env, argv[1])));
  return NULL;
}

/* stat from (ino, mode, size, mtimeMs, nlink, uid, gid) at argv[0..6] */
static void fill_stat(napi_env env, napi_value *argv, struct stat *st) {
  memset(st, 0, sizeof *st);
  double mtime = num(env, argv[3]);
  st->st_ino = (ino_t)num(env, argv[0]);
  st->st_mode = (mode_t)num(env, argv[1]);
  st->st_size = (off_t)num(env, argv[2]);
  st->st_nlink = (nlink_t)num(env, argv[4]);
  st->st_uid = (uid_t)num(env, argv[5]);
  st->st_gid = (gid_t)num(env, argv[6]);
  st->st_blksize = 4096;
  st->st_blocks = (st->st_size + 511) / 512;
  int64_t ms = (int64_t)mtime;
  st->st_mtim.tv_sec = ms / 1000;
  st->st_mtim.tv_nsec = (ms % 1000) * 1000000;
  st->st_atim = st->st_mtim;
  st->st_ctim = st->st_mtim;
}

/* replyEntry(req, ino, mode, size, mtimeMs, nlink, uid, gid, attrTimeout, entryTimeout); ino 0 = a cached "no such entry". */
static napi_value js_reply_entry(napi_env env, napi_callback_info info) {
  napi_value argv[10];
  if (!get_args(env, info, 10, argv)) return NULL;
  struct fuse_entry_param e;
  memset(&e, 0, sizeof e);
  fill_stat(env, argv + 1, &e.attr);
  e.ino = e.attr.st_ino;
  e.generation = 1;
  e.attr_timeout = num(env, argv[8]);
  e.entry_timeout = num(env, argv[9]);
  REPLY(fuse_reply_entry(req_of(env, argv[0]), &e));
  return NULL;
}

/* replyAttr(req, ino, mode, size, mtimeMs, nlink, uid, gid, attrTimeout) */
static napi_value js_reply_attr(napi_env env, napi_callback_info info) {
  napi_value argv[9];
  if (!get_args(env, info, 9, argv)) return NULL;
  struct stat st;
  fill_stat(env, argv + 1, &st);
  REPLY(fuse_reply_attr(req_of(env, argv[0]), &st, num(env, argv[8])));
  return NULL;
}

/* replyOpen(req, fh, keepCache, cacheDir) */
static napi_value js_reply_open(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  if (!get_args(env, info, 4, argv)) return NULL;
  bool keep = false, cache_dir = false;
  napi_get_value_bool(env, argv[2], &keep);
  napi_get_value_bool(env, argv[3], &cache_dir);
  struct fuse_file_info fi;
  memset(&fi, 0, sizeof fi);
  fi.fh = (uint64_t)num(env, argv[1]);
  fi.keep_cache = keep ? 1 : 0;
  fi.cache_readdir = cache_dir ? 1 : 0;
  fi.noflush = 1;
  REPLY(fuse_reply_open(req_of(env, argv[0]), &fi));
  return NULL;
}

/* replyBuf(req, buffer) */
static napi_value js_reply_buf(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!get_args(env, info, 2, argv)) return NULL;
  void *data = NULL;
  size_t len = 0;
  CHECK(env, napi_get_buffer_info(env, argv[1], &data, &len));
  REPLY(fuse_reply_buf(req_of(env, argv[0]), data, len));
  return NULL;
}

/*
 * replyDir(req, size, firstOffset, names, inos, modes) → how many entries fit.
 * Entry i gets offset firstOffset + i + 1 (the offset of the next one).
 */
static napi_value js_reply_dir(napi_env env, napi_callback_info info) {
  napi_value argv[6];
  if (!get_args(env, info, 6, argv)) return NULL;
  fuse_req_t req = req_of(env, argv[0]);
  size_t size = (size_t)num(env, argv[1]);
  double first = num(env, argv[2]);
  uint32_t count = 0;
  CHECK(env, napi_get_array_length(env, argv[3], &count));
  char *buf = malloc(size == 0 ? 1 : size);
  if (buf == NULL) {
    REPLY(fuse_reply_err(req, ENOMEM));
    return NULL;
  }
  size_t used = 0;
  uint32_t added = 0;
  char name[1024];
  for (uint32_t i = 0; i < count; i++) {
    napi_value v;
    size_t len;
    if (napi_get_element(env, argv[3], i, &v) != napi_ok || napi_get_value_string_utf8(env, v, name, sizeof name, &len) != napi_ok) break;
    struct stat st;
    memset(&st, 0, sizeof st);
    napi_get_element(env, argv[4], i, &v);
    st.st_ino = (ino_t)num(env, v);
    napi_get_element(env, argv[5], i, &v);
    st.st_mode = (mode_t)num(env, v);
    size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)(first + i + 1));
    if (need > size - used) break;
    used += need;
    added++;
  }
  REPLY(fuse_reply_buf(req, buf, used));
  free(buf);
  napi_value result;
  CHECK(env, napi_create_uint32(env, added, &result));
  return result;
}

/*
 * replyDirPlus(req, size, firstOffset, names, stats, attrTimeout, entryTimeout) → how many entries fit.
 * stats: a Float64Array of 7 numbers per entry (ino, mode, size, mtimeMs, nlink, uid, gid), as replyEntry takes
 * them. Entry i gets offset firstOffset + i + 1. The kernel takes one lookup of every entry that fits except "."
 * and "..": the caller counts them.
 */
static napi_value js_reply_dir_plus(napi_env env, napi_callback_info info) {
  napi_value argv[7];
  if (!get_args(env, info, 7, argv)) return NULL;
  fuse_req_t req = req_of(env, argv[0]);
  size_t size = (size_t)num(env, argv[1]);
  double first = num(env, argv[2]);
  double attr_timeout = num(env, argv[5]);
  double entry_timeout = num(env, argv[6]);
  uint32_t count = 0;
  CHECK(env, napi_get_array_length(env, argv[3], &count));
  napi_typedarray_type type;
  size_t nstats = 0;
  void *data = NULL;
  CHECK(env, napi_get_typedarray_info(env, argv[4], &type, &nstats, &data, NULL, NULL));
  if (type != napi_float64_array || nstats < (size_t)count * 7) {
    napi_throw_type_error(env, NULL, "knowledgefs_fuse: replyDirPlus needs 7 stats per name");
    return NULL;
  }
  const double *st = data;
  char *buf = malloc(size == 0 ? 1 : size);
  if (buf == NULL) {
    REPLY(fuse_reply_err(req, ENOMEM));
    return NULL;
  }
  size_t used = 0;
  uint32_t added = 0;
  char name[1024];
  for (uint32_t i = 0; i < count; i++) {
    napi_value v;
    size_t len;
    if (napi_get_element(env, argv[3], i, &v) != napi_ok || napi_get_value_string_utf8(env, v, name, sizeof name, &len) != napi_ok) break;
    const double *s7 = st + 7 * (size_t)i;
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.attr.st_ino = (ino_t)s7[0];
    e.attr.st_mode = (mode_t)s7[1];
    e.attr.st_size = (off_t)s7[2];
    e.attr.st_nlink = (nlink_t)s7[4];
    e.attr.st_uid = (uid_t)s7[5];
    e.attr.st_gid = (gid_t)s7[6];
    e.attr.st_blksize = 4096;
    e.attr.st_blocks = (e.attr.st_size + 511) / 512;
    int64_t ms = (int64_t)s7[3];
    e.attr.st_mtim.tv_sec = ms / 1000;
    e.attr.st_mtim.tv_nsec = (ms % 1000) * 1000000;
    e.attr.st_atim = e.attr.st_mtim;
    e.attr.st_ctim = e.attr.st_mtim;
    e.ino = e.attr.st_ino;
    e.generation = 1;
    e.attr_timeout = attr_timeout;
    e.entry_timeout = entry_timeout;
    size_t need = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, (off_t)(first + i + 1));
    if (need > size - used) break;
    used += need;
    added++;
  }
  REPLY(fuse_reply_buf(req, buf, used));
  free(buf);
  napi_value result;
  CHECK(env, napi_create_uint32(env, added, &result));
  return result;
}

/* replyStatfs(req, blocks, files) */
static napi_value js_reply_statfs(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (!get_args(env, info, 3, argv)) return NULL;
  struct statvfs s;
  memset(&s, 0, sizeof s);
  s.f_bsize = 4096;
  s.f_frsize = 4096;
  s.f_blocks = (fsblkcnt_t)num(env, argv[1]);
  s.f_files = (fsfilcnt_t)num(env, argv[2]);
  s.f_namemax = 255;
  REPLY(fuse_reply_statfs(req_of(env, argv[0]), &s));
  return NULL;
}

static void enqueue(fuse_ino_t ino, char *name) {
  notice_t *n = malloc(sizeof *n);
  if (n == NULL) {
    free(name);
    return;
  }
  n->next = NULL;
  n->ino = ino;
  n->name = name;
  pthread_mutex_lock(&g.queue_lock);
  if (g.tail == NULL) g.head = n;
  else g.tail->next = n;
  g.tail = n;
  pthread_cond_signal(&g.queue_cond);
  pthread_mutex_unlock(&g.queue_lock);
}

/* invalEntry(parentIno, name): the kernel forgets that name (or that it had no such name). */
static napi_value js_inval_entry(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!get_args(env, info, 2, argv)) return NULL;
  size_t len = 0;
  CHECK(env, napi_get_value_string_utf8(env, argv[1], NULL, 0, &len));
  char *name = malloc(len + 1);
  if (name == NULL) return NULL;
  napi_get_value_string_utf8(env, argv[1], name, len + 1, &len);
  if (g.state == RUNNING) enqueue((fuse_ino_t)num(env, argv[0]), name);
  else free(name);
  return NULL;
}

/* invalInode(ino): the kernel drops that inode's attributes and cached listing. */
static napi_value js_inval_inode(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!get_args(env, info, 1, argv)) return NULL;
  if (g.state == RUNNING) enqueue((fuse_ino_t)num(env, argv[0]), NULL);
  return NULL;
}

/* fastAllow(ino, scopeId): opens of `ino` may be answered here while the scope's grant is fresh; scopeId 2^32 - 1: a directory, whose opendirs may be. */
static napi_value js_fast_allow(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!get_args(env, info, 2, argv)) return NULL;
  fast_put((fuse_ino_t)num(env, argv[0]), (uint32_t)num(env, argv[1]));
  return NULL;
}

/* fastDrop(ino): opens of `ino` go to JavaScript again. */
static napi_value js_fast_drop(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!get_args(env, info, 1, argv)) return NULL;
  fast_drop((fuse_ino_t)num(env, argv[0]));
  return NULL;
}

/* fastGrant(scopeId, untilMs): the scope's grant is fresh until that Date.now() time (0: not at all). */
static napi_value js_fast_grant(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!get_args(env, info, 2, argv)) return NULL;
  fast_grant((uint32_t)num(env, argv[0]), num(env, argv[1]));
  return NULL;
}

/* fastTakeUsed(scopeId) → whether an open of that scope was answered here since the last call. */
static napi_value js_fast_take_used(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!get_args(env, info, 1, argv)) return NULL;
  uint32_t scope = (uint32_t)num(env, argv[0]);
  bool used = false;
  pthread_rwlock_rdlock(&fast.lock);
  if (scope < fast.nscopes) used = __atomic_exchange_n(&fast.used[scope], 0, __ATOMIC_RELAXED) != 0;
  pthread_rwlock_unlock(&fast.lock);
  napi_value result;
  CHECK(env, napi_get_boolean(env, used, &result));
  return result;
}

/* fastCounts() → [opens, releases, opendirs, releasedirs] answered here so far. */
static napi_value js_fast_counts(napi_env env, napi_callback_info info) {
  (void)info;
  uint64_t *counts[] = {&fast.opens, &fast.releases, &fast.opendirs, &fast.releasedirs};
  napi_value arr, v;
  CHECK(env, napi_create_array_with_length(env, 4, &arr));
  for (uint32_t i = 0; i < 4; i++) {
    CHECK(env, napi_create_double(env, (double)__atomic_load_n(counts[i], __ATOMIC_RELAXED), &v));
    CHECK(env, napi_set_element(env, arr, i, v));
  }
  return arr;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"mount", NULL, js_mount, NULL, NULL, NULL, napi_default, NULL},
      {"unmount", NULL, js_unmount, NULL, NULL, NULL, napi_default, NULL},
      {"unref", NULL, js_unref, NULL, NULL, NULL, napi_default, NULL},
      {"replyErr", NULL, js_reply_err, NULL, NULL, NULL, napi_default, NULL},
      {"replyEntry", NULL, js_reply_entry, NULL, NULL, NULL, napi_default, NULL},
      {"replyAttr", NULL, js_reply_attr, NULL, NULL, NULL, napi_default, NULL},
      {"replyOpen", NULL, js_reply_open, NULL, NULL, NULL, napi_default, NULL},
      {"replyBuf", NULL, js_reply_buf, NULL, NULL, NULL, napi_default, NULL},
      {"replyDir", NULL, js_reply_dir, NULL, NULL, NULL, napi_default, NULL},
      {"replyDirPlus", NULL, js_reply_dir_plus, NULL, NULL, NULL, napi_default, NULL},
      {"replyStatfs", NULL, js_reply_statfs, NULL, NULL, NULL, napi_default, NULL},
      {"invalEntry", NULL, js_inval_entry, NULL, NULL, NULL, napi_default, NULL},
      {"invalInode", NULL, js_inval_inode, NULL, NULL, NULL, napi_default, NULL},
      {"fastAllow", NULL, js_fast_allow, NULL, NULL, NULL, napi_default, NULL},
      {"fastDrop", NULL, js_fast_drop, NULL, NULL, NULL, napi_default, NULL},
      {"fastGrant", NULL, js_fast_grant, NULL, NULL, NULL, napi_default, NULL},
      {"fastTakeUsed", NULL, js_fast_take_used, NULL, NULL, NULL, napi_default, NULL},
      {"fastCounts", NULL, js_fast_counts, NULL, NULL, NULL, napi_default, NULL},
  };
  if (napi_define_properties(env, exports, sizeof props / sizeof props[0], props) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
