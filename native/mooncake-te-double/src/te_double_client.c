/*
 * The sender side of the Transfer Engine TEST DOUBLE: segments (a connection to a peer and its two threads, in
 * te_double_pipeline.c), batches, submission and status.
 */
#include "te_double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int connect_timeout_ms(void) {
    const char *v = getenv("KVC_TE_DOUBLE_CONNECT_TIMEOUT_MS");
    int ms = v != NULL ? atoi(v) : 0;
    return ms > 0 ? ms : 1000;
}

struct segment *segment_get(struct engine *e, int64_t id) {
    if (e == NULL || id < 1 || id > TE_MAX_SEGMENTS) {
        return NULL;
    }
    pthread_mutex_lock(&e->segments_lock);
    struct segment *s = e->segments[id - 1];
    pthread_mutex_unlock(&e->segments_lock);
    return s;
}

static void segment_free(struct segment *s) {
    close(s->fd);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->answered);
    free(s->iov.data);
    free(s->headers.data);
    free(s);
}

static segment_id_t open_segment(struct engine *e, const char *name, int use_cache) {
    if (e == NULL || name == NULL || strlen(name) >= TE_NAME_MAX) {
        return TE_ERR;
    }
    if (!e->tcp_installed) {
        fprintf(stderr, TE_LOG_PREFIX "openSegment(%s): no transport installed (installTransport \"tcp\")\n", name);
        return TE_ERR;
    }
    pthread_mutex_lock(&e->segments_lock);
    if (use_cache) {
        for (int i = 0; i < TE_MAX_SEGMENTS; i++) {
            if (e->segments[i] != NULL && strcmp(e->segments[i]->name, name) == 0
                && !atomic_load(&e->segments[i]->broken)) {
                pthread_mutex_unlock(&e->segments_lock);
                return i + 1;
            }
        }
    }
    int slot = -1;
    for (int i = 0; i < TE_MAX_SEGMENTS && slot < 0; i++) {
        if (e->segments[i] == NULL) {
            slot = i;
        }
    }
    pthread_mutex_unlock(&e->segments_lock);
    if (slot < 0) {
        return TE_ERR;
    }
    int fd = wire_connect(name, connect_timeout_ms());
    if (fd < 0) {
        return TE_ERR;
    }
    struct segment *s = calloc(1, sizeof *s);
    if (s == NULL) {
        close(fd);
        return TE_ERR;
    }
    s->fd = fd;
    snprintf(s->name, sizeof s->name, "%s", name);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->answered, NULL);
    if (pthread_create(&s->receiver, NULL, segment_receiver, s) != 0) {
        segment_free(s);
        return TE_ERR;
    }
    pthread_mutex_lock(&e->segments_lock);
    while (slot < TE_MAX_SEGMENTS && e->segments[slot] != NULL) {
        slot++; /* taken by a concurrent open meanwhile */
    }
    if (slot == TE_MAX_SEGMENTS || pthread_create(&s->sender, NULL, segment_sender, s) != 0) {
        pthread_mutex_unlock(&e->segments_lock);
        shutdown(fd, SHUT_RDWR);
        pthread_join(s->receiver, NULL);
        segment_free(s);
        return TE_ERR;
    }
    s->id = slot + 1;
    e->segments[slot] = s;
    pthread_mutex_unlock(&e->segments_lock);
    return s->id;
}

segment_id_t openSegment(transfer_engine_t engine, const char *segment_name) {
    return open_segment(engine, segment_name, 1);
}

segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name) {
    return open_segment(engine, segment_name, 0);
}

/* Sends what is queued, waits for every reply (or the connection's end), then ends both threads. */
static void segment_stop(struct segment *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->sender, NULL);
    pthread_mutex_lock(&s->lock);
    while (s->awaited_head != NULL && !s->receiver_done) {
        pthread_cond_wait(&s->answered, &s->lock);
    }
    s->closing = 1;
    pthread_mutex_unlock(&s->lock);
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->receiver, NULL);
    segment_free(s);
}

int closeSegment(transfer_engine_t engine, segment_id_t segment_id) {
    struct engine *e = engine;
    if (e == NULL || segment_id < 1 || segment_id > TE_MAX_SEGMENTS) {
        return TE_ERR;
    }
    pthread_mutex_lock(&e->segments_lock);
    struct segment *s = e->segments[segment_id - 1];
    e->segments[segment_id - 1] = NULL;
    pthread_mutex_unlock(&e->segments_lock);
    if (s == NULL) {
        return TE_ERR;
    }
    segment_stop(s);
    return 0;
}

void segments_close_all(struct engine *e) {
    for (int i = 1; i <= TE_MAX_SEGMENTS; i++) {
        closeSegment(e, i);
    }
}

int syncSegmentCache(transfer_engine_t engine) {
    return engine == NULL ? TE_ERR : 0;
}

batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size) {
    if (engine == NULL || batch_size == 0 || batch_size > (1u << 20)) {
        return INVALID_BATCH;
    }
    /* Tasks are set when submitted: a large batch costs no zeroing of tasks it never uses. */
    struct batch *b = malloc(sizeof *b + batch_size * sizeof(struct task));
    if (b == NULL) {
        return INVALID_BATCH;
    }
    b->capacity = batch_size;
    b->count = 0;
    return (batch_id_t)(uintptr_t)b;
}

int freeBatchID(transfer_engine_t engine, batch_id_t batch_id) {
    struct batch *b = (struct batch *)(uintptr_t)batch_id;
    if (engine == NULL || b == NULL || batch_id == INVALID_BATCH) {
        return TE_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < b->count; i++) {
        if (!b->tasks[i].polled_terminal) {
            return TE_BUSY;
        }
    }
    free(b);
    return 0;
}

static int submit(struct engine *e, batch_id_t batch_id, struct transfer_request *entries, size_t count,
                  const notify_msg_t *notify) {
    struct batch *b = (struct batch *)(uintptr_t)batch_id;
    if (e == NULL || b == NULL || batch_id == INVALID_BATCH || (entries == NULL && count > 0)) {
        return TE_INVALID_ARGUMENT;
    }
    if (count > b->capacity - b->count) {
        return TE_TOO_MANY_REQUESTS;
    }
    struct segment *notify_to = NULL;
    for (size_t i = 0; i < count; i++) {
        const struct transfer_request *r = &entries[i];
        struct segment *s = segment_get(e, r->target_id);
        if ((r->opcode != OPCODE_READ && r->opcode != OPCODE_WRITE) || r->source == NULL || s == NULL) {
            return TE_INVALID_ARGUMENT;
        }
        notify_to = s;
    }
    if (notify != NULL && (notify_to == NULL || notify->name == NULL || notify->msg == NULL)) {
        return TE_INVALID_ARGUMENT;
    }
    /* Each run of requests to one segment is queued at once, so its sender sends it in one round. */
    struct segment *run_to = NULL;
    struct job *first = NULL;
    struct job *last = NULL;
    for (size_t i = 0; i <= count; i++) {
        struct segment *s = i < count ? segment_get(e, entries[i].target_id) : notify_to;
        if (s != run_to && first != NULL) {
            if (segment_enqueue(run_to, first, last) != 0) {
                jobs_fail(first);
            }
            first = NULL;
        }
        run_to = s;
        struct job *job = calloc(1, sizeof *job);
        if (i == count) {
            if (notify == NULL) {
                free(job);
                break;
            }
            if (job != NULL) {
                job->name = strdup(notify->name);
                job->msg = strdup(notify->msg);
            }
            if (job == NULL || job->name == NULL || job->msg == NULL) {
                jobs_fail(job);
                job = NULL;
            }
        } else {
            struct task *t = &b->tasks[b->count++];
            t->request = entries[i];
            t->polled_terminal = 0;
            atomic_store(&t->transferred, 0);
            atomic_store(&t->status, job == NULL ? STATUS_FAILED : STATUS_WAITING);
            if (job != NULL) {
                job->task = t;
            }
        }
        if (job != NULL) {
            if (first == NULL) {
                first = job;
            } else {
                last->next = job;
            }
            last = job;
        }
    }
    if (first != NULL && segment_enqueue(run_to, first, last) != 0) {
        jobs_fail(first);
    }
    return 0;
}

int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries, size_t count) {
    return submit(engine, batch_id, entries, count, NULL);
}

int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries,
                             size_t count, notify_msg_t notify_msg) {
    return submit(engine, batch_id, entries, count, &notify_msg);
}

int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
                      struct transfer_status *status) {
    struct batch *b = (struct batch *)(uintptr_t)batch_id;
    if (engine == NULL || b == NULL || batch_id == INVALID_BATCH || status == NULL || task_id >= b->count) {
        return TE_INVALID_ARGUMENT;
    }
    struct task *t = &b->tasks[task_id];
    int s = atomic_load(&t->status);
    status->status = s;
    status->transferred_bytes = atomic_load(&t->transferred);
    if (s == STATUS_COMPLETED || s == STATUS_FAILED) {
        t->polled_terminal = 1;
    }
    return 0;
}

int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id, notify_msg_t notify_msg) {
    struct segment *s = segment_get(engine, (int64_t)(target_id > TE_MAX_SEGMENTS ? 0 : target_id));
    if (s == NULL || notify_msg.name == NULL || notify_msg.msg == NULL) {
        return TE_ERR;
    }
    struct job *job = calloc(1, sizeof *job);
    if (job == NULL) {
        return TE_ERR;
    }
    job->name = strdup(notify_msg.name);
    job->msg = strdup(notify_msg.msg);
    if (job->name == NULL || job->msg == NULL || segment_enqueue(s, job, job) != 0) {
        jobs_fail(job);
        return TE_ERR;
    }
    return 0;
}
