// What the Node-API files share: throwing on a failed call, reading
// arguments, and sending a reply only while the session is alive.

#ifndef KNOWLEDGEFS_JS_GLUE_H
#define KNOWLEDGEFS_JS_GLUE_H

#include "knowledgefs_fuse.h"

#define CHECK(env, call)                                              \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error((env), NULL, "knowledgefs_fuse: " #call);      \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

/* Sends one reply, or nothing once the session has ended. */
#define REPLY(call)      \
  do {                   \
    if (begin_reply()) { \
      call;              \
      end_reply();       \
    }                    \
  } while (0)

/* The first `want` arguments, or a TypeError thrown and 0. */
int get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv);
double num(napi_env env, napi_value v);
fuse_req_t req_of(napi_env env, napi_value v);

/* js_replies.c: the reply calls, as the module defines them. */
extern const napi_property_descriptor reply_properties[];
extern const size_t reply_property_count;

#endif
