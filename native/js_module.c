// The module JavaScript loads: mount (the session and the thread-safe
// function that carries requests into JavaScript), unmount, unref, the
// invalidations JavaScript queues, the fast path's table calls, and the
// module's init, which also defines the reply calls (js_replies.c).

#include <errno.h>
#include <string.h>

#include "js_glue.h"

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

int get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
    napi_throw_type_error(env, NULL, "knowledgefs_fuse: missing arguments");
    return 0;
  }
  return 1;
}

double num(napi_env env, napi_value v) {
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}

fuse_req_t req_of(napi_env env, napi_value v) { return (fuse_req_t)(uintptr_t)num(env, v); }

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
  const char *failed = session_mount(mountpoint, options);
  if (failed != NULL) {
    napi_throw_error(env, NULL, failed);
    return NULL;
  }
  napi_value name;
  napi_threadsafe_function tsfn;
  CHECK(env, napi_create_string_utf8(env, "knowledgefs-fuse", NAPI_AUTO_LENGTH, &name));
  if (napi_create_threadsafe_function(env, argv[2], NULL, name, 0, 1, NULL, NULL, NULL, call_js, &tsfn) != napi_ok) {
    session_abandon();
    napi_throw_error(env, NULL, "knowledgefs_fuse: cannot create the request queue");
    return NULL;
  }
  failed = session_start(tsfn);
  if (failed != NULL) napi_throw_error(env, NULL, failed);
  return NULL;
}

/* unmount(): detaches the mount; the session ends (OP_ENDED) once the kernel closes the connection. */
static napi_value js_unmount(napi_env env, napi_callback_info info) {
  (void)info;
  session_unmount();
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
  napi_value result;
  CHECK(env, napi_get_boolean(env, fast_take_used(scope) != 0, &result));
  return result;
}

/* fastCounts() → [opens, releases, opendirs, releasedirs] answered here so far. */
static napi_value js_fast_counts(napi_env env, napi_callback_info info) {
  (void)info;
  uint64_t counts[4];
  fast_counts(counts);
  napi_value arr, v;
  CHECK(env, napi_create_array_with_length(env, 4, &arr));
  for (uint32_t i = 0; i < 4; i++) {
    CHECK(env, napi_create_double(env, (double)counts[i], &v));
    CHECK(env, napi_set_element(env, arr, i, v));
  }
  return arr;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"mount", NULL, js_mount, NULL, NULL, NULL, napi_default, NULL},
      {"unmount", NULL, js_unmount, NULL, NULL, NULL, napi_default, NULL},
      {"unref", NULL, js_unref, NULL, NULL, NULL, napi_default, NULL},
      {"invalEntry", NULL, js_inval_entry, NULL, NULL, NULL, napi_default, NULL},
      {"invalInode", NULL, js_inval_inode, NULL, NULL, NULL, napi_default, NULL},
      {"fastAllow", NULL, js_fast_allow, NULL, NULL, NULL, napi_default, NULL},
      {"fastDrop", NULL, js_fast_drop, NULL, NULL, NULL, napi_default, NULL},
      {"fastGrant", NULL, js_fast_grant, NULL, NULL, NULL, napi_default, NULL},
      {"fastTakeUsed", NULL, js_fast_take_used, NULL, NULL, NULL, napi_default, NULL},
      {"fastCounts", NULL, js_fast_counts, NULL, NULL, NULL, napi_default, NULL},
  };
  if (napi_define_properties(env, exports, sizeof props / sizeof props[0], props) != napi_ok) return NULL;
  if (napi_define_properties(env, exports, reply_property_count, reply_properties) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
