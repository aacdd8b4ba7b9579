// What the kernel asks, on the session threads: each request is copied into
// a message and handed to JavaScript through the thread-safe function, never
// waiting for it (the thread goes straight back to reading); every change is
// refused here with EROFS. The opens and releases the fast path may answer
// itself are in fast_path.c; the table of low-level operations is at the end.

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "knowledgefs_fuse.h"

void post(message_t *m) {
  if (napi_call_threadsafe_function(g.tsfn, m, napi_tsfn_nonblocking) != napi_ok) {
    /* Only when the function is closing: the mount is going away. */
    if (m->req != NULL) fuse_reply_err(m->req, EIO);
    free(m->name);
    free(m->forgets);
    free(m);
  }
}

message_t *message(int op, fuse_req_t req, fuse_ino_t ino) {
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
void post_number(int op, fuse_req_t req, fuse_ino_t ino, double a) {
  message_t *m = message(op, req, ino);
  if (m == NULL) return;
  m->a = a;
  post(m);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)fi;
  post_number(OP_GETATTR, req, ino, 0);
}

/* READ and READDIR: a handle, a size and an offset. */
void post_sized(int op, fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
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
void post_handle(int op, fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  message_t *m = message(op, req, ino);
  if (m == NULL) return;
  m->fh = fi->fh;
  post(m);
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

const struct fuse_lowlevel_ops knowledgefs_ops = {
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

