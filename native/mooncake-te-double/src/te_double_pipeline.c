/*
 * A segment's connection, pipelined, in the Transfer Engine TEST DOUBLE. Each opened peer has one connection and two
 * threads. The sender takes every job queued so far and sends them back to back in one round (a run of WRITEs
 * becomes one WRITEV message: entries, then the payloads straight from the caller's memory), without waiting for the
 * peer between requests; the receiver reads the peer's replies, which come in send order, and ends the tasks they
 * answer. Jobs go out in submission order, so a notification reaches the peer after the bytes submitted before it.
 * A broken connection (the peer killed, say) fails every task not answered.
 */
#include "te_double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Ends a task: COMPLETED with every byte, or FAILED. The task is not touched after this. */
static void task_end(struct task *t, int ok) {
    if (ok) {
        atomic_store(&t->transferred, t->request.length);
    }
    atomic_store(&t->status, ok ? STATUS_COMPLETED : STATUS_FAILED);
}

/* Fails every task of the jobs and frees them. */
void jobs_fail(struct job *j) {
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

void *segment_sender(void *arg) {
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

void *segment_receiver(void *arg) {
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
