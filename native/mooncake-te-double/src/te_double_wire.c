/* Loopback TCP helpers of the Transfer Engine TEST DOUBLE. */
#include "te_double.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

int wire_send_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int wire_recv_all(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Skips the n bytes at the front of iov[0..count) that were moved; returns how many entries are now done. */
static size_t iov_advance(struct iovec *iov, size_t count, size_t n) {
    size_t done = 0;
    while (done < count && n >= iov[done].iov_len) {
        n -= iov[done].iov_len;
        done++;
    }
    if (done < count) {
        iov[done].iov_base = (char *)iov[done].iov_base + n;
        iov[done].iov_len -= n;
    }
    return done;
}

/* Sends every byte of iov[0..count) (which it consumes), IOV_MAX entries per sendmsg at most. */
int wire_send_iov(int fd, struct iovec *iov, size_t count) {
    while (count > 0) {
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = iov;
        m.msg_iovlen = count < IOV_MAX ? count : IOV_MAX;
        ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        size_t done = iov_advance(iov, count, (size_t)n);
        iov += done;
        count -= done;
    }
    return 0;
}

/* Fills every byte of iov[0..count) (which it consumes), IOV_MAX entries per readv at most. */
int wire_recv_iov(int fd, struct iovec *iov, size_t count) {
    while (count > 0 && iov[0].iov_len == 0) {
        iov++;
        count--;
    }
    while (count > 0) {
        ssize_t n = readv(fd, iov, count < IOV_MAX ? (int)count : IOV_MAX);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        size_t done = iov_advance(iov, count, (size_t)n);
        iov += done;
        count -= done;
    }
    return 0;
}

/* At least bytes bytes of s, kept for the next call; NULL when memory runs out. */
void *scratch_reserve(struct scratch *s, size_t bytes) {
    if (bytes > s->capacity) {
        size_t capacity = s->capacity == 0 ? 4096 : s->capacity;
        while (capacity < bytes) {
            capacity *= 2;
        }
        void *grown = realloc(s->data, capacity);
        if (grown == NULL) {
            return NULL;
        }
        s->data = grown;
        s->capacity = capacity;
    }
    return s->data;
}

int wire_split_host_port(const char *name, char *host, size_t host_len, int *port) {
    const char *colon = strrchr(name, ':');
    if (colon == NULL || colon == name || (size_t)(colon - name) >= host_len) {
        return -1;
    }
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || p <= 0 || p > 65535) {
        return -1;
    }
    memcpy(host, name, (size_t)(colon - name));
    host[colon - name] = '\0';
    *port = (int)p;
    return 0;
}

static int resolve(const char *host, int port, struct sockaddr_in *out) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *found = NULL;
    if (getaddrinfo(host, NULL, &hints, &found) != 0 || found == NULL) {
        return -1;
    }
    memcpy(out, found->ai_addr, sizeof *out);
    out->sin_port = htons((uint16_t)port);
    freeaddrinfo(found);
    return 0;
}

/*
 * Both ends of a connection: no Nagle delay, since replies and notifications are small. The socket buffers stay
 * with the kernel's autotuning, which grows them on loopback: fixed 1, 4 or 8 MiB buffers made a 4 MiB WRITE
 * slower (5 December 2026, 2 vCPUs).
 */
void wire_tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A connected socket to "host:port", or -1 after timeout_ms or a refusal. */
int wire_connect(const char *host_port, int timeout_ms) {
    char host[TE_NAME_MAX];
    int port;
    struct sockaddr_in addr;
    if (wire_split_host_port(host_port, host, sizeof host, &port) != 0 || resolve(host, port, &addr) != 0) {
        fprintf(stderr, TE_LOG_PREFIX "openSegment: '%s' is not a resolvable host:port\n", host_port);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = connect(fd, (struct sockaddr *)&addr, sizeof addr);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        rc = poll(&pfd, 1, timeout_ms);
        int err = 0;
        socklen_t err_len = sizeof err;
        if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) == 0 && err == 0) {
            rc = 0;
        } else {
            errno = rc == 0 ? ETIMEDOUT : err;
            rc = -1;
        }
    }
    if (rc != 0) {
        fprintf(stderr, TE_LOG_PREFIX "openSegment: cannot connect to %s: %s\n", host_port, strerror(errno));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, flags);
    wire_tune(fd);
    return fd;
}

/* A listening socket on host, port chosen by the kernel. */
int wire_listen(const char *host, int *port_out) {
    struct sockaddr_in addr;
    if (resolve(host, 0, &addr) != 0) {
        fprintf(stderr, TE_LOG_PREFIX "cannot resolve local host '%s'\n", host);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    socklen_t len = sizeof addr;
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 64) != 0
        || getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        fprintf(stderr, TE_LOG_PREFIX "cannot listen on %s: %s\n", host, strerror(errno));
        close(fd);
        return -1;
    }
    *port_out = ntohs(addr.sin_port);
    return fd;
}
