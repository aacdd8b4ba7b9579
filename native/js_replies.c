// The reply calls JavaScript answers requests with: an error, an entry, its
// attributes, an open, data, a listing (plain or with attributes) and statfs.
// Each is sent only while the session is alive (REPLY). js_module.c defines
// them on the module from reply_properties.

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "js_glue.h"

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

const napi_property_descriptor reply_properties[] = {
    {"replyErr", NULL, js_reply_err, NULL, NULL, NULL, napi_default, NULL},
    {"replyEntry", NULL, js_reply_entry, NULL, NULL, NULL, napi_default, NULL},
    {"replyAttr", NULL, js_reply_attr, NULL, NULL, NULL, napi_default, NULL},
    {"replyOpen", NULL, js_reply_open, NULL, NULL, NULL, napi_default, NULL},
    {"replyBuf", NULL, js_reply_buf, NULL, NULL, NULL, napi_default, NULL},
    {"replyDir", NULL, js_reply_dir, NULL, NULL, NULL, napi_default, NULL},
    {"replyDirPlus", NULL, js_reply_dir_plus, NULL, NULL, NULL, napi_default, NULL},
    {"replyStatfs", NULL, js_reply_statfs, NULL, NULL, NULL, napi_default, NULL},
};
const size_t reply_property_count = sizeof reply_properties / sizeof reply_properties[0];
