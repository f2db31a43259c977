/*
 * Two processes over loopback TCP (the child is this program, exec'd again): the child WRITEs 1 MiB into the parent's registered buffer and
 * notifies; a WRITE past the registration ends FAILED and leaves the guard bytes alone.
 */
#include "transfer_engine_c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BYTES (1u << 20)
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAILED: %s (line %d)\n", #c, __LINE__); exit(1); } } while (0)

static int wait_status(transfer_engine_t e, batch_id_t b, size_t task) {
    for (;;) {
        struct transfer_status s;
        CHECK(getTransferStatus(e, b, task, &s) == 0);
        if (s.status == STATUS_COMPLETED || s.status == STATUS_FAILED) {
            return s.status;
        }
        usleep(100);
    }
}

static int child(const char *peer, uint64_t remote) {
    transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
    CHECK(e != NULL && installTransport(e, "tcp", NULL) != NULL);
    unsigned char *src = malloc(BYTES);
    for (size_t i = 0; i < BYTES; i++) {
        src[i] = (unsigned char)(i * 31 + 7);
    }
    CHECK(registerLocalMemory(e, src, BYTES, "cpu:0", 1) == 0);
    segment_id_t seg = openSegment(e, peer);
    CHECK(seg > 0);
    batch_id_t b = allocateBatchID(e, 2);
    struct transfer_request ok = {.opcode = OPCODE_WRITE, .source = src, .target_id = seg,
                                  .target_offset = remote, .length = BYTES};
    struct transfer_request past = ok;
    past.target_offset = remote + 1;
    notify_msg_t note = {.name = "req-1", .msg = "done"};
    CHECK(submitTransfer(e, b, &past, 1) == 0);
    CHECK(wait_status(e, b, 0) == STATUS_FAILED);
    CHECK(submitTransferWithNotify(e, b, &ok, 1, note) == 0);
    CHECK(wait_status(e, b, 1) == STATUS_COMPLETED);
    CHECK(submitTransfer(e, b, &ok, 1) == 2);
    CHECK(freeBatchID(e, b) == 0);
    CHECK(openSegment(e, "127.0.0.1:1") < 0);
    destroyTransferEngine(e);
    free(src);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "child") == 0) {
        return child(argv[2], strtoull(argv[3], NULL, 10));
    }
    transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
    CHECK(e != NULL && installTransport(e, "tcp", NULL) != NULL);
    char name[64];
    CHECK(getLocalIpAndPort(e, name, sizeof name) == 0);
    unsigned char *dst = calloc(1, BYTES + 64);
    CHECK(registerLocalMemory(e, dst + 32, BYTES, "cpu:0", 1) == 0);
    CHECK(registerLocalMemory(e, dst + 40, 8, "cpu:0", 1) == -7);
    /* The child execs this program again, so that it starts with no thread of the parent's engine. */
    char remote[32];
    snprintf(remote, sizeof remote, "%llu", (unsigned long long)(uintptr_t)(dst + 32));
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "child", name, remote, (char *)NULL);
        _exit(127);
    }
    int size = 0;
    notify_msg_t *notes = NULL;
    for (int tries = 0; tries < 20000 && size == 0; tries++) {
        freeNotifsMsgBuf(notes, size);
        notes = getNotifsFromEngine(e, &size);
        if (size == 0) {
            usleep(500);
        }
    }
    CHECK(size == 1 && strcmp(notes[0].name, "req-1") == 0 && strcmp(notes[0].msg, "done") == 0);
    freeNotifsMsgBuf(notes, size);
    for (size_t i = 0; i < BYTES; i++) {
        CHECK(dst[32 + i] == (unsigned char)(i * 31 + 7));
    }
    for (size_t i = 0; i < 32; i++) {
        CHECK(dst[i] == 0 && dst[32 + BYTES + i] == 0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(unregisterLocalMemory(e, dst + 32) == 0);
    destroyTransferEngine(e);
    free(dst);
    puts("te_double_two_process_test: ok");
    return 0;
}
