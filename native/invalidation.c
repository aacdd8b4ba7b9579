// The invalidation thread: it sends the kernel the notifications JavaScript
// queued (inval_entry for a name, inval_inode for a node's attributes and
// listing). A notification waits for the inode lock the kernel holds while a
// LOOKUP or READDIR of the same directory is in flight, and that request
// waits for JavaScript's reply: sent from the JavaScript thread it could
// wait forever; from this thread it just waits.

#include <string.h>

#include "knowledgefs_fuse.h"

typedef struct notice {
  struct notice *next;
  fuse_ino_t ino;
  char *name; /* NULL: inval_inode(ino); else inval_entry(ino, name) */
} notice_t;

static struct {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  notice_t *head;
  notice_t *tail;
  int stop;
} q = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

void enqueue(fuse_ino_t ino, char *name) {
  notice_t *n = malloc(sizeof *n);
  if (n == NULL) {
    free(name);
    return;
  }
  n->next = NULL;
  n->ino = ino;
  n->name = name;
  pthread_mutex_lock(&q.lock);
  if (q.tail == NULL) q.head = n;
  else q.tail->next = n;
  q.tail = n;
  pthread_cond_signal(&q.cond);
  pthread_mutex_unlock(&q.lock);
}

static void *inval_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&q.lock);
    while (q.head == NULL && !q.stop) pthread_cond_wait(&q.cond, &q.lock);
    notice_t *n = q.head;
    if (n == NULL) {
      pthread_mutex_unlock(&q.lock);
      return NULL;
    }
    q.head = n->next;
    if (q.head == NULL) q.tail = NULL;
    int stopping = q.stop;
    pthread_mutex_unlock(&q.lock);
    /* Once stopping, the connection is gone: drop what is left. ENOENT (the kernel doesn't know that inode) is normal. */
    if (!stopping) {
      if (n->name == NULL) fuse_lowlevel_notify_inval_inode(g.se, n->ino, 0, 0);
      else fuse_lowlevel_notify_inval_entry(g.se, n->ino, n->name, strlen(n->name));
    }
    free(n->name);
    free(n);
  }
}

int inval_start(void) {
  q.head = q.tail = NULL;
  q.stop = 0;
  return pthread_create(&q.thread, NULL, inval_main, NULL);
}

void inval_stop(void) {
  pthread_mutex_lock(&q.lock);
  q.stop = 1;
  pthread_cond_signal(&q.cond);
  pthread_mutex_unlock(&q.lock);
  pthread_join(q.thread, NULL);
}
