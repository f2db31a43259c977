/*
 * The peer side of the Transfer Engine TEST DOUBLE: a listener thread, and one thread per accepted
 * connection that copies WRITE payloads into registered memory, answers READs from it, and queues
 * notifications. A range outside every registration is refused (FAILED at the sender) and touches nothing.
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

static int serve_transfer(struct engine *e, int fd, const struct wire_header *h) {
    struct wire_reply reply = {.status = WIRE_OK};
    pthread_rwlock_rdlock(&e->registrations_lock);
    if (!memory_covers(e, h->a, h->b)) {
        pthread_rwlock_unlock(&e->registrations_lock);
        fprintf(stderr, TE_LOG_PREFIX "%s of %llu bytes at 0x%llx refused: not inside a registered buffer\n",
                h->op == WIRE_WRITE ? "WRITE" : "READ", (unsigned long long)h->b, (unsigned long long)h->a);
        reply.status = WIRE_OUT_OF_RANGE;
        if (h->op == WIRE_WRITE && wire_discard(fd, h->b) != 0) {
            return -1;
        }
        return wire_send_all(fd, &reply, sizeof reply);
    }
    /* The read lock stays held during the copy, so unregisterLocalMemory waits for it. */
    int rc;
    if (h->op == WIRE_WRITE) {
        rc = wire_recv_all(fd, (void *)(uintptr_t)h->a, h->b);
        if (rc == 0) {
            rc = wire_send_all(fd, &reply, sizeof reply);
        }
    } else {
        rc = wire_send_all(fd, &reply, sizeof reply);
        if (rc == 0) {
            rc = wire_send_all(fd, (const void *)(uintptr_t)h->a, h->b);
        }
    }
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
    struct wire_reply reply = {.status = WIRE_OK};
    return wire_send_all(fd, &reply, sizeof reply);
}

static void *serve_connection(void *arg) {
    struct connection *c = arg;
    struct wire_header h;
    while (wire_recv_all(c->fd, &h, sizeof h) == 0) {
        int rc = -1;
        if (h.op == WIRE_WRITE || h.op == WIRE_READ) {
            rc = serve_transfer(c->engine, c->fd, &h);
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
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
        free(c);
        c = next;
    }
}
