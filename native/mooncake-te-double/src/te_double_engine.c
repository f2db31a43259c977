/*
 * TEST DOUBLE of Mooncake's Transfer Engine (transfer_engine_c.h). It is NOT Mooncake: no RDMA,
 * no metadata server, no topology. It exports the functions kvconnector binds, with the same
 * signatures, struct layouts and return-code conventions as the real library (see
 * shared/spec/mooncake-transfer-engine.md), and moves bytes between PROCESSES over real loopback
 * TCP, so that the Java bindings can be tested in CI:
 *
 *  - only P2PHANDSHAKE metadata: the engine listens on the host of local_server_name (port chosen
 *    by the kernel) and its segment name is "host:port", as getLocalIpAndPort returns it;
 *    ip_or_host_name, rpc_port and auto_discover are ignored; other metadata gives NULL;
 *  - only the "tcp" transport, which must be installed before openSegment (as with auto_discover 0);
 *  - openSegment connects to "host:port" and fails with -1 after KVC_TE_DOUBLE_CONNECT_TIMEOUT_MS
 *    (default 1000 ms) or at once when the port is closed; the same name gives the cached id;
 *  - target_offset is the peer's virtual address; a WRITE or READ whose range is not inside one of
 *    the peer's registrations ends FAILED and touches no byte;
 *  - registrations: NULL or 0 bytes give -1, an overlap gives -7, an unknown location (not cpu:N,
 *    cuda:N or *) gives -1 (stricter than the real library); "cuda:N" memory is read and written
 *    by the CPU, so it must be host-visible (the CUDA driver double's memory is);
 *  - submitTransfer*: 1 for a bad argument (unknown segment, LOCAL_SEGMENT, bad opcode, NULL
 *    source), 2 when the batch would exceed its size; getTransferStatus fills its output only when
 *    it returns 0; freeBatchID returns 4 until every task was polled to a terminal state;
 *    batch ids are pointers, as in the real library: a freed id must not be used again;
 *  - a batch's requests are pipelined on the segment's one connection, as the real engine batches them per
 *    connection: sent back to back, applied by the peer in order, acknowledged without a round trip per request;
 *  - notifications travel on the same connection after the bytes submitted before them;
 *  - no TIMEOUT status: a transfer ends COMPLETED, or FAILED when refused or when its connection breaks.
 *
 * Logs go to stderr with the prefix "[mooncake-te-double]".
 */
#include "te_double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

transfer_engine_t createTransferEngine(const char *metadata_conn_string, const char *local_server_name,
                                       const char *ip_or_host_name, uint64_t rpc_port, int auto_discover) {
    (void)ip_or_host_name;
    (void)rpc_port;
    (void)auto_discover;
    if (metadata_conn_string == NULL || strcmp(metadata_conn_string, "P2PHANDSHAKE") != 0) {
        fprintf(stderr, TE_LOG_PREFIX "metadata '%s' is not supported: the double knows only P2PHANDSHAKE\n",
                metadata_conn_string == NULL ? "(null)" : metadata_conn_string);
        return NULL;
    }
    if (local_server_name == NULL || local_server_name[0] == '\0' || strlen(local_server_name) >= TE_NAME_MAX) {
        fprintf(stderr, TE_LOG_PREFIX "local_server_name is empty or too long\n");
        return NULL;
    }
    struct engine *e = calloc(1, sizeof *e);
    if (e == NULL) {
        return NULL;
    }
    snprintf(e->host, sizeof e->host, "%s", local_server_name);
    char *colon = strrchr(e->host, ':');
    if (colon != NULL) {
        *colon = '\0';
    }
    e->listen_fd = wire_listen(e->host, &e->port);
    if (e->listen_fd < 0) {
        free(e);
        return NULL;
    }
    pthread_rwlock_init(&e->registrations_lock, NULL);
    pthread_mutex_init(&e->segments_lock, NULL);
    pthread_mutex_init(&e->connections_lock, NULL);
    pthread_mutex_init(&e->notifications_lock, NULL);
    if (pthread_create(&e->listener, NULL, server_listen_loop, e) != 0) {
        close(e->listen_fd);
        free(e);
        return NULL;
    }
    return e;
}

void destroyTransferEngine(transfer_engine_t engine) {
    struct engine *e = engine;
    if (e == NULL) {
        return;
    }
    segments_close_all(e);
    server_stop(e);
    memory_free_all(e);
    freeNotifsMsgBuf(e->notifications, e->notification_count);
    pthread_rwlock_destroy(&e->registrations_lock);
    pthread_mutex_destroy(&e->segments_lock);
    pthread_mutex_destroy(&e->connections_lock);
    pthread_mutex_destroy(&e->notifications_lock);
    free(e);
}

int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len) {
    struct engine *e = engine;
    if (e == NULL || buf_out == NULL) {
        return TE_ERR;
    }
    int n = snprintf(buf_out, buf_len, "%s:%d", e->host, e->port);
    return n < 0 || (size_t)n >= buf_len ? TE_ERR : 0;
}

transport_t installTransport(transfer_engine_t engine, const char *proto, void **args) {
    (void)args;
    struct engine *e = engine;
    if (e == NULL || proto == NULL || strcmp(proto, "tcp") != 0) {
        fprintf(stderr, TE_LOG_PREFIX "installTransport: '%s' is not supported: the double has only tcp\n",
                proto == NULL ? "(null)" : proto);
        return NULL;
    }
    e->tcp_installed = 1;
    return &e->tcp_installed;
}

int uninstallTransport(transfer_engine_t engine, const char *proto) {
    struct engine *e = engine;
    if (e == NULL || proto == NULL || strcmp(proto, "tcp") != 0 || !e->tcp_installed) {
        return TE_ERR;
    }
    e->tcp_installed = 0;
    return 0;
}

notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size) {
    struct engine *e = engine;
    if (e == NULL || size == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&e->notifications_lock);
    notify_msg_t *taken = e->notifications;
    *size = e->notification_count;
    e->notifications = NULL;
    e->notification_count = 0;
    e->notification_capacity = 0;
    pthread_mutex_unlock(&e->notifications_lock);
    /* Like the real library: an array (perhaps empty) that freeNotifsMsgBuf releases. */
    return taken != NULL ? taken : calloc(1, sizeof(notify_msg_t));
}

int freeNotifsMsgBuf(notify_msg_t *msg, int size) {
    if (msg == NULL) {
        return 0;
    }
    for (int i = 0; i < size; i++) {
        free(msg[i].name);
        free(msg[i].msg);
    }
    free(msg);
    return 0;
}
