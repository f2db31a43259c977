/*
 * The peer side of the Transfer Engine TEST DOUBLE: a listener thread, and one thread per accepted
 * connection that applies its messages in order: WRITEV payloads land in registered memory, READs are answered
 * from it, notifications are queued. A range outside every registration is refused (FAILED at the sender) and
 * touches nothing.
 */
#include "te_double.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void notifications_add(struct engine *e, char *name, char *msg) {
    pthread_mutex_lock(&e->notifications_lock);
    if (e->notification_count == e->notification_capacity) {
        int capacity = e->notification_capacity == 0 ? 16 : e->notification_capacity * 2;
        notify_msg_t *grown = realloc(e->notifications, (size_t)capacity * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&e->notifications_lock);
            free(name);
            free(msg);
            return;
        }
        e->notifications = grown;
        e->notification_capacity = capacity;
    }
    e->notifications[e->notification_count].name = name;
    e->notifications[e->notification_count].msg = msg;
    e->notification_count++;
    pthread_mutex_unlock(&e->notifications_lock);
}

/* Bytes a refused WRITE entry's payload is read into and dropped, per iovec entry. */
#define DISCARD_BYTES 65536

/*
 * A WRITEV: reads its entries, then every payload straight into registered memory with as few readv calls as the
 * socket allows (a refused entry's payload is read into a scratch buffer and dropped, touching nothing), then
 * answers once with the refused entries' indices. The registrations' read lock is held while bytes land, so
 * unregisterLocalMemory waits for them.
 */
static int serve_writev(struct connection *c, const struct wire_header *h) {
    struct engine *e = c->engine;
    if (h->count == 0 || h->count > WIRE_VECTOR_MAX) {
        fprintf(stderr, TE_LOG_PREFIX "a WRITEV of %u entries is malformed; closing the connection\n", h->count);
        return -1;
    }
    struct wire_entry *entries = scratch_reserve(&c->entries, h->count * sizeof *entries);
    struct wire_reply *reply = scratch_reserve(&c->replies, sizeof *reply + h->count * sizeof(uint32_t));
    char *discard = scratch_reserve(&c->discard, DISCARD_BYTES);
    if (entries == NULL || reply == NULL || discard == NULL
        || wire_recv_all(c->fd, entries, h->count * sizeof *entries) != 0) {
        return -1;
    }
    uint64_t total = 0;
    size_t slots = 0;
    for (uint32_t i = 0; i < h->count; i++) {
        if (entries[i].length > h->a - total) {
            fprintf(stderr, TE_LOG_PREFIX "a WRITEV's entries exceed its %llu payload bytes; closing the "
                    "connection\n", (unsigned long long)h->a);
            return -1;
        }
        total += entries[i].length;
        slots += 1 + entries[i].length / DISCARD_BYTES;
    }
    struct iovec *iov = scratch_reserve(&c->iov, slots * sizeof *iov);
    if (total != h->a || iov == NULL) {
        return -1;
    }
    uint32_t *failed = (uint32_t *)(reply + 1);
    reply->status = WIRE_OK;
    reply->failed = 0;
    size_t n = 0;
    pthread_rwlock_rdlock(&e->registrations_lock);
    for (uint32_t i = 0; i < h->count; i++) {
        const struct wire_entry *w = &entries[i];
        if (memory_covers(e, w->addr, w->length)) {
            iov[n++] = (struct iovec){.iov_base = (void *)(uintptr_t)w->addr, .iov_len = w->length};
            continue;
        }
        fprintf(stderr, TE_LOG_PREFIX "WRITE of %llu bytes at 0x%llx refused: not inside a registered buffer\n",
                (unsigned long long)w->length, (unsigned long long)w->addr);
        failed[reply->failed++] = i;
        reply->status = WIRE_OUT_OF_RANGE;
        for (uint64_t left = w->length; left > 0; ) {
            size_t part = left < DISCARD_BYTES ? (size_t)left : DISCARD_BYTES;
            iov[n++] = (struct iovec){.iov_base = discard, .iov_len = part};
            left -= part;
        }
    }
    int rc = wire_recv_iov(c->fd, iov, n);
    pthread_rwlock_unlock(&e->registrations_lock);
    if (rc != 0) {
        return -1;
    }
    return wire_send_all(c->fd, reply, sizeof *reply + reply->failed * sizeof *failed);
}

/* A READ: the reply, then the bytes from registered memory, in one send. */
static int serve_read(struct engine *e, int fd, const struct wire_header *h) {
    struct wire_reply reply = {.status = WIRE_OK};
    pthread_rwlock_rdlock(&e->registrations_lock);
    if (!memory_covers(e, h->a, h->b)) {
        pthread_rwlock_unlock(&e->registrations_lock);
        fprintf(stderr, TE_LOG_PREFIX "READ of %llu bytes at 0x%llx refused: not inside a registered buffer\n",
                (unsigned long long)h->b, (unsigned long long)h->a);
        reply.status = WIRE_OUT_OF_RANGE;
        return wire_send_all(fd, &reply, sizeof reply);
    }
    struct iovec iov[2] = {{.iov_base = &reply, .iov_len = sizeof reply},
                           {.iov_base = (void *)(uintptr_t)h->a, .iov_len = h->b}};
    int rc = wire_send_iov(fd, iov, 2);
    pthread_rwlock_unlock(&e->registrations_lock);
    return rc;
}

static int serve_notify(struct engine *e, int fd, const struct wire_header *h) {
    if (h->a > 65536 || h->b > 1 << 24) {
        return -1;
    }
    char *name = malloc(h->a + 1);
    char *msg = malloc(h->b + 1);
    if (name == NULL || msg == NULL || wire_recv_all(fd, name, h->a) != 0 || wire_recv_all(fd, msg, h->b) != 0) {
        free(name);
        free(msg);
        return -1;
    }
    name[h->a] = '\0';
    msg[h->b] = '\0';
    notifications_add(e, name, msg);
    return 0;
}

static void *serve_connection(void *arg) {
    struct connection *c = arg;
    struct wire_header h;
    while (wire_recv_all(c->fd, &h, sizeof h) == 0) {
        int rc = -1;
        if (h.op == WIRE_WRITEV) {
            rc = serve_writev(c, &h);
        } else if (h.op == WIRE_READ) {
            rc = serve_read(c->engine, c->fd, &h);
        } else if (h.op == WIRE_NOTIFY) {
            rc = serve_notify(c->engine, c->fd, &h);
        }
        if (rc != 0) {
            break;
        }
    }
    shutdown(c->fd, SHUT_RDWR);
    return NULL;
}

void *server_listen_loop(void *arg) {
    struct engine *e = arg;
    while (!atomic_load(&e->stopping)) {
        int fd = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            break;
        }
        wire_tune(fd);
        struct connection *c = calloc(1, sizeof *c);
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->engine = e;
        pthread_mutex_lock(&e->connections_lock);
        if (atomic_load(&e->stopping) || pthread_create(&c->thread, NULL, serve_connection, c) != 0) {
            pthread_mutex_unlock(&e->connections_lock);
            close(fd);
            free(c);
            continue;
        }
        c->next = e->connections;
        e->connections = c;
        pthread_mutex_unlock(&e->connections_lock);
    }
    return NULL;
}

/* Stops accepting, ends every connection and joins every thread of the peer side. */
void server_stop(struct engine *e) {
    atomic_store(&e->stopping, 1);
    shutdown(e->listen_fd, SHUT_RDWR);
    pthread_join(e->listener, NULL);
    close(e->listen_fd);
    pthread_mutex_lock(&e->connections_lock);
    struct connection *c = e->connections;
    e->connections = NULL;
    pthread_mutex_unlock(&e->connections_lock);
    while (c != NULL) {
        struct connection *next = c->next;
        shutdown(c->fd, SHUT_RDWR);
        pthread_join(c->thread, NULL);
        close(c->fd);
        free(c->entries.data);
        free(c->iov.data);
        free(c->replies.data);
        free(c->discard.data);
        free(c);
        c = next;
    }
}
