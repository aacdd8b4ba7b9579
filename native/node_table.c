// The fast path's tables: any session thread reads them, JavaScript writes
// them (through js_module.c). Nodes JavaScript marked servable (a file, with
// its scope id) or opened (a directory, DIR_SCOPE), chained by node id under
// one read-write lock; each scope's grant deadline and whether an open of it
// was answered here since JavaScript last asked; and the set of fast
// directory handles whose READDIR reached JavaScript (their RELEASEDIR must
// reach it too).

#include <time.h>

#include "knowledgefs_fuse.h"

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

void listed_add(uint64_t fh) {
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
int listed_take(uint64_t fh) {
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

void fast_put(fuse_ino_t ino, uint32_t scope) {
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

void fast_drop(fuse_ino_t ino) {
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

void fast_clear(void) {
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

void fast_grant(uint32_t scope, double until) {
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
int fast_dir(fuse_ino_t ino) {
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
int fast_servable(fuse_ino_t ino) {
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

int fast_take_used(uint32_t scope) {
  int used = 0;
  pthread_rwlock_rdlock(&fast.lock);
  if (scope < fast.nscopes) used = __atomic_exchange_n(&fast.used[scope], 0, __ATOMIC_RELAXED) != 0;
  pthread_rwlock_unlock(&fast.lock);
  return used;
}
