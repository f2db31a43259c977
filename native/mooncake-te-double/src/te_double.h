/*
 * Internals of the kvconnector TEST DOUBLE of Mooncake's Transfer Engine (see te_double_engine.c
 * for what it reproduces). Not Mooncake: a small loopback-TCP engine with the same C ABI.
 */
#ifndef KVC_TE_DOUBLE_H
#define KVC_TE_DOUBLE_H

#include "transfer_engine_c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#define TE_LOG_PREFIX "[mooncake-te-double] "
#define TE_MAX_SEGMENTS 256
#define TE_NAME_MAX 128
#define TE_LOCATION_MAX 64

/* Negative codes of the int functions, as the real library returns them. */
enum { TE_ERR = -1, TE_ERR_ADDRESS_OVERLAPPED = -7 };
/* Positive codes of submitTransfer*, getTransferStatus and freeBatchID. */
enum { TE_INVALID_ARGUMENT = 1, TE_TOO_MANY_REQUESTS = 2, TE_BUSY = 4 };

/*
 * The wire: messages in native byte order (both ends are on one host), pipelined on one connection; the peer
 * applies them in order.
 *  - WRITEV: header {op, count, a = payload bytes}, count entries {peer address, length}, then the payloads back
 *    to back; one reply {status, failed} then `failed` uint32 indices of refused entries.
 *  - READ: header {op, 0, a = peer address, b = length}; reply {status, 0}, then the bytes when status is OK.
 *  - NOTIFY: header {op, 0, a = bytes of name, b = bytes of msg}, then name and msg; no reply.
 */
enum { WIRE_WRITEV = 1, WIRE_READ = 2, WIRE_NOTIFY = 3 };
enum { WIRE_OK = 0, WIRE_OUT_OF_RANGE = 1 };
/* Requests in one WRITEV message: its entries and its payloads fit one sendmsg/readv (IOV_MAX is 1024). */
#define WIRE_VECTOR_MAX 1000
struct wire_header {
    uint32_t op;
    uint32_t count; /* WRITEV: entries */
    uint64_t a;
    uint64_t b;
};
struct wire_entry {
    uint64_t addr;
    uint64_t length;
};
struct wire_reply {
    uint32_t status;
    uint32_t failed; /* WRITEV: refused entries, whose indices follow */
};

struct registration {
    uintptr_t addr;
    size_t length;
    char location[TE_LOCATION_MAX];
    struct registration *next;
};

struct task {
    struct transfer_request request;
    _Atomic int status;
    _Atomic uint64_t transferred;
    int polled_terminal; /* touched only by the batch's one user thread */
};

struct batch {
    size_t capacity;
    size_t count;
    struct task tasks[];
};

struct job {
    struct task *task;  /* NULL for a notification */
    char *name;
    char *msg;
    struct job *next;
};

/* A message on the wire that the peer answers (WRITEV or READ), waiting for its reply in send order. */
struct awaited {
    uint32_t op;
    uint32_t count;
    struct awaited *next;
    struct task *tasks[];
};

/* A growable buffer that one thread reuses, so that steady traffic allocates nothing. */
struct scratch {
    void *data;
    size_t capacity;
};

/*
 * A peer's segment: one connection, a sender thread that pipelines its queued jobs onto it in submission order,
 * and a receiver thread that reads the peer's replies and ends the tasks they answer.
 */
struct segment {
    int id;
    char name[TE_NAME_MAX];
    int fd;
    _Atomic int broken;
    int stopping;   /* closeSegment: send what is queued, then end */
    int closing;    /* closeSegment: every reply is in; the shutdown that follows is no breakage */
    int receiver_done;
    pthread_t sender;
    pthread_t receiver;
    pthread_mutex_t lock;
    pthread_cond_t wake;      /* jobs queued, or stopping */
    pthread_cond_t answered;  /* the awaited queue emptied, or the receiver ended */
    struct job *head;
    struct job *tail;
    struct awaited *awaited_head;
    struct awaited *awaited_tail;
    struct scratch iov;       /* the sender's */
    struct scratch headers;   /* the sender's */
};

/* One accepted connection, served by its own thread; the scratch buffers are that thread's. */
struct connection {
    int fd;
    pthread_t thread;
    struct engine *engine;
    struct connection *next;
    struct scratch entries;
    struct scratch iov;
    struct scratch replies;
    struct scratch discard;
};

struct engine {
    char host[TE_NAME_MAX];
    int port;
    int listen_fd;
    pthread_t listener;
    _Atomic int stopping;
    int tcp_installed;

    pthread_rwlock_t registrations_lock;
    struct registration *registrations;

    pthread_mutex_t segments_lock;
    struct segment *segments[TE_MAX_SEGMENTS]; /* segment id - 1 */

    pthread_mutex_t connections_lock;
    struct connection *connections;

    pthread_mutex_t notifications_lock;
    notify_msg_t *notifications;
    int notification_count;
    int notification_capacity;
};

/* te_double_wire.c */
int wire_send_all(int fd, const void *buf, size_t len);
int wire_recv_all(int fd, void *buf, size_t len);
int wire_send_iov(int fd, struct iovec *iov, size_t count);
int wire_recv_iov(int fd, struct iovec *iov, size_t count);
void *scratch_reserve(struct scratch *s, size_t bytes);
int wire_connect(const char *host_port, int timeout_ms);
void wire_tune(int fd);
int wire_listen(const char *host, int *port_out);
int wire_split_host_port(const char *name, char *host, size_t host_len, int *port);

/* te_double_memory.c */
int memory_covers(struct engine *e, uint64_t addr, uint64_t length);
void memory_free_all(struct engine *e);

/* te_double_server.c */
void *server_listen_loop(void *engine);
void server_stop(struct engine *e);
void notifications_add(struct engine *e, char *name, char *msg);

/* te_double_client.c */
void segments_close_all(struct engine *e);
struct segment *segment_get(struct engine *e, int64_t id);

/* te_double_pipeline.c */
void *segment_sender(void *segment);
void *segment_receiver(void *segment);
int segment_enqueue(struct segment *s, struct job *first, struct job *last);
void jobs_fail(struct job *j);

#endif
