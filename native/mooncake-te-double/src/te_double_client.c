/*
 * The sender side of the Transfer Engine TEST DOUBLE: segments (one connection and one worker
 * thread per opened peer), batches, submission and status. A segment's worker runs its jobs in
 * submission order, so a notification reaches the peer after the bytes submitted before it.
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

static int run_transfer(struct segment *s, struct task *t) {
    const struct transfer_request *r = &t->request;
    struct wire_header h = {.op = r->opcode == OPCODE_WRITE ? WIRE_WRITE : WIRE_READ,
                            .a = r->target_offset, .b = r->length};
    struct wire_reply reply;
    if (wire_send_all(s->fd, &h, sizeof h) != 0) {
        return -1;
    }
    if (r->opcode == OPCODE_WRITE) {
        if (wire_send_all(s->fd, r->source, r->length) != 0 || wire_recv_all(s->fd, &reply, sizeof reply) != 0) {
            return -1;
        }
        return (int)reply.status;
    }
    if (wire_recv_all(s->fd, &reply, sizeof reply) != 0) {
        return -1;
    }
    if (reply.status == WIRE_OK && wire_recv_all(s->fd, r->source, r->length) != 0) {
        return -1;
    }
    return (int)reply.status;
}

static int run_notify(struct segment *s, const char *name, const char *msg) {
    struct wire_header h = {.op = WIRE_NOTIFY, .a = strlen(name), .b = strlen(msg)};
    struct wire_reply reply;
    if (wire_send_all(s->fd, &h, sizeof h) != 0 || wire_send_all(s->fd, name, h.a) != 0
        || wire_send_all(s->fd, msg, h.b) != 0 || wire_recv_all(s->fd, &reply, sizeof reply) != 0) {
        return -1;
    }
    return 0;
}

static void *segment_worker(void *arg) {
    struct segment *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (s->head == NULL && !s->stopping) {
            pthread_cond_wait(&s->wake, &s->lock);
        }
        struct job *job = s->head;
        if (job == NULL) {
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        s->head = job->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        int broken = s->broken;
        pthread_mutex_unlock(&s->lock);

        int rc = broken ? -1 : 0;
        if (job->task != NULL) {
            if (rc == 0) {
                atomic_store(&job->task->status, STATUS_PENDING);
                rc = run_transfer(s, job->task);
            }
            if (rc == 0) {
                atomic_store(&job->task->transferred, job->task->request.length);
            }
            atomic_store(&job->task->status, rc == 0 ? STATUS_COMPLETED : STATUS_FAILED);
        } else if (rc == 0) {
            rc = run_notify(s, job->name, job->msg);
        }
        if (rc < 0) {
            fprintf(stderr, TE_LOG_PREFIX "connection to segment %s broke; its transfers fail\n", s->name);
            pthread_mutex_lock(&s->lock);
            s->broken = 1;
            pthread_mutex_unlock(&s->lock);
        }
        free(job->name);
        free(job->msg);
        free(job);
    }
}

int segment_enqueue(struct segment *s, struct job *job) {
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    job->next = NULL;
    if (s->tail != NULL) {
        s->tail->next = job;
    } else {
        s->head = job;
    }
    s->tail = job;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return 0;
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
            if (e->segments[i] != NULL && strcmp(e->segments[i]->name, name) == 0 && !e->segments[i]->broken) {
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
    pthread_mutex_lock(&e->segments_lock);
    while (slot < TE_MAX_SEGMENTS && e->segments[slot] != NULL) {
        slot++; /* taken by a concurrent open meanwhile */
    }
    if (slot == TE_MAX_SEGMENTS || pthread_create(&s->worker, NULL, segment_worker, s) != 0) {
        pthread_mutex_unlock(&e->segments_lock);
        close(fd);
        free(s);
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

static void segment_stop(struct segment *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL); /* runs the jobs still queued first */
    shutdown(s->fd, SHUT_RDWR);
    close(s->fd);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    free(s);
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
    struct batch *b = calloc(1, sizeof *b + batch_size * sizeof(struct task));
    if (b == NULL) {
        return INVALID_BATCH;
    }
    b->capacity = batch_size;
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
    for (size_t i = 0; i < count; i++) {
        struct task *t = &b->tasks[b->count++];
        t->request = entries[i];
        t->polled_terminal = 0;
        atomic_store(&t->transferred, 0);
        atomic_store(&t->status, STATUS_WAITING);
        struct job *job = calloc(1, sizeof *job);
        if (job != NULL) {
            job->task = t;
        }
        struct segment *s = segment_get(e, entries[i].target_id);
        if (job == NULL || s == NULL || segment_enqueue(s, job) != 0) {
            free(job);
            atomic_store(&t->status, STATUS_FAILED);
        }
    }
    if (notify != NULL) {
        struct job *job = calloc(1, sizeof *job);
        if (job == NULL) {
            return TE_INVALID_ARGUMENT;
        }
        job->name = strdup(notify->name);
        job->msg = strdup(notify->msg);
        if (segment_enqueue(notify_to, job) != 0) {
            free(job->name);
            free(job->msg);
            free(job);
        }
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
    if (job->name == NULL || job->msg == NULL || segment_enqueue(s, job) != 0) {
        free(job->name);
        free(job->msg);
        free(job);
        return TE_ERR;
    }
    return 0;
}
