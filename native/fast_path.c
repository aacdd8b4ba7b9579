// The fast path, on the session thread that read the request: an OPEN of a
// servable node whose scope's grant is fresh is answered here (handle
// FAST_FH, kept page cache), and so is its RELEASE; an OPENDIR of a directory
// JavaScript opened before gets a fast handle of its own (FAST_DIR_BIT), and
// its RELEASEDIR is answered here unless its listing reached JavaScript.
// Everything else goes to JavaScript (requests.c).

#include <fcntl.h>

#include "knowledgefs_fuse.h"

static struct {
  uint64_t opens;       /* answered here (atomic) */
  uint64_t releases;    /* answered here (atomic) */
  uint64_t opendirs;    /* answered here (atomic) */
  uint64_t releasedirs; /* answered here (atomic) */
  uint64_t next_dir;    /* the number of the next fast directory handle (atomic) */
} answered;

void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  const int write_intent = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
  if ((fi->flags & write_intent) == 0 && fast_servable(ino)) {
    fi->fh = FAST_FH;
    fi->keep_cache = 1;
    fi->noflush = 1;
    if (fuse_reply_open(req, fi) == 0) __atomic_add_fetch(&answered.opens, 1, __ATOMIC_RELAXED);
    return;
  }
  post_number(OP_OPEN, req, ino, (double)fi->flags);
}

void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (fi->fh == FAST_FH) {
    fuse_reply_err(req, 0);
    __atomic_add_fetch(&answered.releases, 1, __ATOMIC_RELAXED);
    return;
  }
  post_handle(OP_RELEASE, req, ino, fi);
}

void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (fast_dir(ino)) {
    fi->fh = FAST_DIR_BIT | (__atomic_add_fetch(&answered.next_dir, 1, __ATOMIC_RELAXED) & 0xffffffffu);
    fi->keep_cache = 1;
    fi->cache_readdir = 1;
    if (fuse_reply_open(req, fi) == 0) __atomic_add_fetch(&answered.opendirs, 1, __ATOMIC_RELAXED);
    return;
  }
  post_number(OP_OPENDIR, req, ino, 0);
}

void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  if (fi->fh & FAST_DIR_BIT) listed_add(fi->fh);
  post_sized(OP_READDIR, req, ino, size, off, fi);
}

void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  if (fi->fh & FAST_DIR_BIT) listed_add(fi->fh);
  post_sized(OP_READDIRPLUS, req, ino, size, off, fi);
}

void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if ((fi->fh & FAST_DIR_BIT) && !listed_take(fi->fh)) {
    fuse_reply_err(req, 0);
    __atomic_add_fetch(&answered.releasedirs, 1, __ATOMIC_RELAXED);
    return;
  }
  post_handle(OP_RELEASEDIR, req, ino, fi);
}

void fast_counts(uint64_t out[4]) {
  out[0] = __atomic_load_n(&answered.opens, __ATOMIC_RELAXED);
  out[1] = __atomic_load_n(&answered.releases, __ATOMIC_RELAXED);
  out[2] = __atomic_load_n(&answered.opendirs, __ATOMIC_RELAXED);
  out[3] = __atomic_load_n(&answered.releasedirs, __ATOMIC_RELAXED);
}
