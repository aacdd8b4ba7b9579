// The physical limit of a FUSE mount whose every open reaches the daemon: the
// smallest libfuse 3 low-level filesystem that serves a directory's files
// from memory with every kernel cache at its best.
//
// - in memory and read-only (files 0444, directories 0555, writes EROFS);
// - entries and attributes cached for an hour, "no such entry" too;
// - open answers keep_cache + noflush, opendir cache_readdir + keep_cache;
// - readdirplus (each listed entry comes with its attributes);
// - libfuse's multi-threaded session loop.
// Every open and release still reaches this process: whatever our mount
// costs above this is our per-request work, not FUSE's.
//
// Usage: ceiling-c SRC_DIR MOUNTPOINT
// Prints `mounted MOUNTPOINT (N files)` once mounted; SIGINT/SIGTERM unmount
// and exit 0. Built by the bench (bench/lib/peers.mjs) with
// `gcc -O2 $(pkg-config --cflags --libs fuse3)`.

#define FUSE_USE_VERSION 312
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define CACHE_SEC 3600.0

typedef struct node {
  char *name;
  fuse_ino_t parent;
  struct stat st;
  char *data;           /* files */
  fuse_ino_t *children; /* directories: sorted by name */
  size_t nchildren;
} node_t;

static node_t *nodes; /* nodes[ino], ino 1 = root; nodes[0] unused */
static size_t nnodes, cap;
static size_t file_count;

static fuse_ino_t add_node(void) {
  if (nnodes == cap) {
    cap = cap ? cap * 2 : 1024;
    nodes = realloc(nodes, cap * sizeof *nodes);
    if (nodes == NULL) { perror("ceiling-c"); exit(1); }
  }
  memset(&nodes[nnodes], 0, sizeof *nodes);
  return nnodes++;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *read_all(const char *path, size_t size) {
  char *buf = malloc(size ? size : 1);
  int fd = open(path, O_RDONLY);
  if (buf == NULL || fd < 0) { perror(path); exit(1); }
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, buf + got, size - got);
    if (n <= 0) { perror(path); exit(1); }
    got += (size_t)n;
  }
  close(fd);
  return buf;
}

/* Loads `path` (a directory) as node `ino`, depth first. */
static void load_dir(const char *path, fuse_ino_t ino) {
  DIR *d = opendir(path);
  if (d == NULL) { perror(path); exit(1); }
  char **names = NULL;
  size_t n = 0, ncap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (n == ncap) { ncap = ncap ? ncap * 2 : 16; names = realloc(names, ncap * sizeof *names); }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, by_name);
  fuse_ino_t *kids = malloc((n ? n : 1) * sizeof *kids);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", path, names[i]);
    struct stat st;
    if (stat(full, &st) != 0) { perror(full); exit(1); }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) { free(names[i]); continue; }
    fuse_ino_t c = add_node();
    nodes[c].name = names[i];
    nodes[c].parent = ino;
    nodes[c].st = st;
    nodes[c].st.st_ino = c;
    nodes[c].st.st_uid = getuid();
    nodes[c].st.st_gid = getgid();
    if (S_ISDIR(st.st_mode)) {
      nodes[c].st.st_mode = S_IFDIR | 0555;
      nodes[c].st.st_nlink = 2;
      load_dir(full, c);
    } else {
      nodes[c].st.st_mode = S_IFREG | 0444;
      nodes[c].st.st_nlink = 1;
      nodes[c].data = read_all(full, (size_t)st.st_size);
      file_count++;
    }
    kids[k++] = c;
  }
  free(names);
  nodes[ino].children = kids;
  nodes[ino].nchildren = k;
}

static node_t *node_of(fuse_ino_t ino) { return ino >= 1 && ino < nnodes ? &nodes[ino] : NULL; }

static fuse_ino_t find_child(node_t *dir, const char *name) {
  size_t lo = 0, hi = dir->nchildren;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(name, nodes[dir->children[mid]].name);
    if (c == 0) return dir->children[mid];
    if (c < 0) hi = mid;
    else lo = mid + 1;
  }
  return 0;
}

static void entry_of(fuse_ino_t ino, struct fuse_entry_param *e) {
  memset(e, 0, sizeof *e);
  e->ino = ino;
  e->generation = 1;
  e->attr_timeout = CACHE_SEC;
  e->entry_timeout = CACHE_SEC;
  if (ino != 0) e->attr = nodes[ino].st;
}

static void ll_init(void *userdata, struct fuse_conn_info *conn) {
  (void)userdata;
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA; /* nothing here ever changes */
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  node_t *dir = node_of(parent);
  if (dir == NULL || dir->data != NULL || !S_ISDIR(dir->st.st_mode)) { fuse_reply_err(req, ENOTDIR); return; }
  struct fuse_entry_param e;
  entry_of(find_child(dir, name), &e); /* ino 0: a cached "no such entry" */
  fuse_reply_entry(req, &e);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)fi;
  node_t *n = node_of(ino);
  if (n == NULL) { fuse_reply_err(req, ENOENT); return; }
  fuse_reply_attr(req, &n->st, CACHE_SEC);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  node_t *n = node_of(ino);
  if (n == NULL) { fuse_reply_err(req, ENOENT); return; }
  if (S_ISDIR(n->st.st_mode)) { fuse_reply_err(req, EISDIR); return; }
  if ((fi->flags & O_ACCMODE) != O_RDONLY) { fuse_reply_err(req, EROFS); return; }
  fi->keep_cache = 1;
  fi->noflush = 1;
  fuse_reply_open(req, fi);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  (void)fi;
  node_t *n = node_of(ino);
  if (n == NULL || n->data == NULL) { fuse_reply_err(req, EBADF); return; }
  size_t len = (size_t)n->st.st_size;
  if ((size_t)off >= len) { fuse_reply_buf(req, NULL, 0); return; }
  if (size > len - (size_t)off) size = len - (size_t)off;
  fuse_reply_buf(req, n->data + off, size);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)ino; (void)fi;
  fuse_reply_err(req, 0);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  node_t *n = node_of(ino);
  if (n == NULL) { fuse_reply_err(req, ENOENT); return; }
  if (!S_ISDIR(n->st.st_mode)) { fuse_reply_err(req, ENOTDIR); return; }
  fi->cache_readdir = 1;
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

/* Entry i of a listing: 0 ".", 1 "..", then the children; the offset of entry i is i + 1. */
static void list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus) {
  node_t *dir = node_of(ino);
  if (dir == NULL) { fuse_reply_err(req, ENOENT); return; }
  char *buf = malloc(size ? size : 1);
  if (buf == NULL) { fuse_reply_err(req, ENOMEM); return; }
  size_t used = 0;
  for (size_t i = (size_t)off; i < dir->nchildren + 2; i++) {
    fuse_ino_t c = i == 0 ? ino : i == 1 ? (dir->parent ? dir->parent : ino) : dir->children[i - 2];
    const char *name = i == 0 ? "." : i == 1 ? ".." : nodes[c].name;
    size_t need;
    if (plus) {
      struct fuse_entry_param e;
      entry_of(c, &e);
      /* "." and "..": attributes only, no lookup count taken (libfuse's convention: ino 0 in the entry). */
      if (i < 2) e.ino = 0;
      need = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, (off_t)(i + 1));
    } else {
      need = fuse_add_direntry(req, buf + used, size - used, name, &nodes[c].st, (off_t)(i + 1));
    }
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf, used);
  free(buf);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  (void)fi;
  list(req, ino, size, off, 0);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  (void)fi;
  list(req, ino, size, off, 1);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)ino; (void)fi;
  fuse_reply_err(req, 0);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino) {
  (void)ino;
  struct statvfs s;
  memset(&s, 0, sizeof s);
  s.f_bsize = s.f_frsize = 4096;
  s.f_files = nnodes - 1;
  s.f_namemax = 255;
  fuse_reply_statfs(req, &s);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  (void)ino; (void)nlookup;
  fuse_reply_none(req); /* nodes live as long as the process */
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *list) {
  (void)count; (void)list;
  fuse_reply_none(req);
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
    /* nothing that writes: the mount is `ro`, so the kernel answers EROFS itself */
};

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: ceiling-c SRC_DIR MOUNTPOINT\n");
    return 2;
  }
  add_node(); /* 0: unused */
  fuse_ino_t root = add_node();
  if (stat(argv[1], &nodes[root].st) != 0) { perror(argv[1]); return 1; }
  nodes[root].st.st_ino = root;
  nodes[root].st.st_mode = S_IFDIR | 0555;
  nodes[root].st.st_nlink = 2;
  nodes[root].st.st_uid = getuid();
  nodes[root].st.st_gid = getgid();
  nodes[root].name = "";
  load_dir(argv[1], root);

  char *fargv[] = {argv[0], "-o", "fsname=kfs-ceiling-c,subtype=kfs-ceiling-c,ro", NULL};
  struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
  struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
  if (se == NULL) return 1;
  if (fuse_set_signal_handlers(se) != 0) return 1;
  if (fuse_session_mount(se, argv[2]) != 0) return 1;
  printf("mounted %s (%zu files)\n", argv[2], file_count);
  fflush(stdout);
  struct fuse_loop_config *cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, 10);
  int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc == 0 ? 0 : 1;
}
