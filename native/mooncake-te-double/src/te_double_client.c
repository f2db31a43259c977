/*
 * The sender side of the Transfer Engine TEST DOUBLE: segments, batches, submission and status. Each opened peer
 * has one connection and two threads. The sender takes every job queued so far and sends them back to back in one
 * pipelined round (a run of WRITEs becomes one WRITEV message: entries, then the payloads straight from the
 * caller's memory), without waiting for the peer between requests; the receiver reads the peer's replies, which
 * come in send order, and ends the tasks they answer. Jobs go out in submission order, so a notification reaches
 * the peer after the bytes submitted before it.
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

/* Ends a task: COMPLETED with every byte, or FAILED. The task is not touched after this. */
static void task_end(struct task *t, int ok) {
    if (ok) {
        atomic_store(&t->transferred, t->request.length);
    }
    atomic_store(&t->status, ok ? STATUS_COMPLETED : STATUS_FAILED);
}

/* Fails every task of the jobs and frees them. */
static void jobs_fail(struct job *j) {
    while (j != NULL) {
        struct job *next = j->next;
        if (j->task != NULL) {
            task_end(j->task, 0);
        }
        free(j->name);
        free(j->msg);
        free(j);
        j = next;
    }
}

/* Frees a chain of awaited messages; with fail, first fails every task they hold. */
static void awaited_free(struct awaited *a, int fail) {
    while (a != NULL) {
        struct awaited *next = a->next;
        for (uint32_t i = 0; fail && i < a->count; i++) {
            task_end(a->tasks[i], 0);
        }
        free(a);
        a = next;
    }
}

/* Marks the connection broken and shuts it down, which wakes both threads: every task not answered fails. */
static void segment_break(struct segment *s) {
    pthread_mutex_lock(&s->lock);
    int was = atomic_exchange(&s->broken, 1);
    int closing = s->closing;
    pthread_mutex_unlock(&s->lock);
    if (!was && !closing) {
        fprintf(stderr, TE_LOG_PREFIX "connection to segment %s broke; its transfers fail\n", s->name);
    }
    shutdown(s->fd, SHUT_RDWR);
}

static struct awaited *awaited_new(uint32_t op, uint32_t count) {
    struct awaited *a = malloc(sizeof *a + count * sizeof a->tasks[0]);
    if (a != NULL) {
        a->op = op;
        a->count = count;
        a->next = NULL;
    }
    return a;
}

/*
 * One pipelined round: the jobs as messages in one iovec (headers and WRITEV entries from the sender's scratch,
 * payloads from the callers' memory), registered as awaited before the first byte goes out, then sent.
 */
static void send_round(struct segment *s, struct job *jobs) {
    size_t njobs = 0;
    for (struct job *j = jobs; j != NULL; j = j->next) {
        njobs++;
    }
    /* At most a header and an entry per job, and three iovec entries per job plus one per message. */
    char *headers = scratch_reserve(&s->headers, njobs * (sizeof(struct wire_header) + sizeof(struct wire_entry)));
    struct iovec *iov = scratch_reserve(&s->iov, njobs * 4 * sizeof *iov);
    struct awaited *first = NULL;
    struct awaited *last = NULL;
    size_t n = 0;
    int ok = headers != NULL && iov != NULL;
    for (struct job *j = jobs; ok && j != NULL; ) {
        struct wire_header *h = (struct wire_header *)headers;
        headers += sizeof *h;
        memset(h, 0, sizeof *h);
        iov[n++] = (struct iovec){.iov_base = h, .iov_len = sizeof *h};
        if (j->task == NULL) {
            h->op = WIRE_NOTIFY;
            h->a = strlen(j->name);
            h->b = strlen(j->msg);
            iov[n++] = (struct iovec){.iov_base = j->name, .iov_len = h->a};
            iov[n++] = (struct iovec){.iov_base = j->msg, .iov_len = h->b};
            j = j->next;
            continue;
        }
        uint32_t count = 0;
        if (j->task->request.opcode == OPCODE_READ) {
            count = 1;
        } else {
            for (struct job *k = j; k != NULL && k->task != NULL && k->task->request.opcode == OPCODE_WRITE
                 && count < WIRE_VECTOR_MAX; k = k->next) {
                count++;
            }
        }
        struct awaited *a = awaited_new(j->task->request.opcode == OPCODE_READ ? WIRE_READ : WIRE_WRITEV, count);
        if (a == NULL) {
            ok = 0;
            break;
        }
        if (last != NULL) {
            last->next = a;
        } else {
            first = a;
        }
        last = a;
        h->op = a->op;
        if (a->op == WIRE_READ) {
            h->a = j->task->request.target_offset;
            h->b = j->task->request.length;
            a->tasks[0] = j->task;
            j = j->next;
            continue;
        }
        h->count = count;
        struct wire_entry *entries = (struct wire_entry *)headers;
        headers += count * sizeof *entries;
        iov[n - 1].iov_len += count * sizeof *entries;
        for (uint32_t i = 0; i < count; i++, j = j->next) {
            const struct transfer_request *r = &j->task->request;
            entries[i] = (struct wire_entry){.addr = r->target_offset, .length = r->length};
            iov[n++] = (struct iovec){.iov_base = r->source, .iov_len = r->length};
            h->a += r->length;
            a->tasks[i] = j->task;
        }
    }
    for (struct job *j = jobs; j != NULL; j = j->next) {
        if (j->task != NULL) {
            atomic_store(&j->task->status, STATUS_PENDING);
        }
    }
    pthread_mutex_lock(&s->lock);
    if (!ok || atomic_load(&s->broken)) {
        pthread_mutex_unlock(&s->lock);
        awaited_free(first, 0);
        jobs_fail(jobs);
        return;
    }
    if (s->awaited_tail != NULL) {
        s->awaited_tail->next = first;
    } else {
        s->awaited_head = first;
    }
    if (last != NULL) {
        s->awaited_tail = last;
    }
    pthread_mutex_unlock(&s->lock);
    if (wire_send_iov(s->fd, iov, n) != 0) {
        segment_break(s);
    }
    while (jobs != NULL) {
        struct job *next = jobs->next;
        free(jobs->name);
        free(jobs->msg);
        free(jobs);
        jobs = next;
    }
}

static void *segment_sender(void *arg) {
    struct segment *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (s->head == NULL && !s->stopping) {
            pthread_cond_wait(&s->wake, &s->lock);
        }
        struct job *jobs = s->head;
        s->head = NULL;
        s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        if (jobs == NULL) {
            return NULL;
        }
        send_round(s, jobs);
    }
}

/* Ends the tasks a reply answers; -1 when the reply does not fit the message or the connection broke. */
static int receive_reply(struct segment *s, struct awaited *a, const struct wire_reply *reply) {
    if (a->op == WIRE_READ) {
        struct task *t = a->tasks[0];
        int rc = reply->failed == 0 ? 0 : -1;
        if (rc == 0 && reply->status == WIRE_OK) {
            rc = wire_recv_all(s->fd, t->request.source, t->request.length);
        }
        task_end(t, rc == 0 && reply->status == WIRE_OK);
        return rc;
    }
    uint32_t refused[WIRE_VECTOR_MAX];
    if (reply->failed > a->count
        || wire_recv_all(s->fd, refused, reply->failed * sizeof refused[0]) != 0) {
        for (uint32_t i = 0; i < a->count; i++) {
            task_end(a->tasks[i], 0);
        }
        return -1;
    }
    /* The peer lists refused entries in ascending order. */
    uint32_t next = 0;
    for (uint32_t i = 0; i < a->count; i++) {
        int refused_here = next < reply->failed && refused[next] == i;
        next += (uint32_t)refused_here;
        task_end(a->tasks[i], !refused_here);
    }
    return 0;
}

static void *segment_receiver(void *arg) {
    struct segment *s = arg;
    struct wire_reply reply;
    while (wire_recv_all(s->fd, &reply, sizeof reply) == 0) {
        pthread_mutex_lock(&s->lock);
        struct awaited *a = s->awaited_head;
        if (a != NULL) {
            s->awaited_head = a->next;
            if (s->awaited_head == NULL) {
                s->awaited_tail = NULL;
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (a == NULL) {
            fprintf(stderr, TE_LOG_PREFIX "segment %s answered a request never sent\n", s->name);
            break;
        }
        a->next = NULL;
        int rc = receive_reply(s, a, &reply);
        free(a);
        if (rc != 0) {
            break;
        }
        pthread_mutex_lock(&s->lock);
        if (s->awaited_head == NULL) {
            pthread_cond_broadcast(&s->answered);
        }
        pthread_mutex_unlock(&s->lock);
    }
    segment_break(s);
    pthread_mutex_lock(&s->lock);
    struct awaited *left = s->awaited_head;
    s->awaited_head = NULL;
    s->awaited_tail = NULL;
    s->receiver_done = 1;
    pthread_cond_broadcast(&s->answered);
    pthread_mutex_unlock(&s->lock);
    awaited_free(left, 1);
    return NULL;
}

/* Appends the jobs first..last (linked) to the segment's queue; -1 when the segment is closing. */
int segment_enqueue(struct segment *s, struct job *first, struct job *last) {
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    last->next = NULL;
    if (s->tail != NULL) {
        s->tail->next = first;
    } else {
        s->head = first;
    }
    s->tail = last;
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
