/*
 * Two processes over loopback TCP (each child is this program, exec'd again, so that the test also runs under
 * ThreadSanitizer, which refuses a fork of a multi-threaded process):
 *  - the writer child WRITEs 1 MiB into the first half of the parent's registered buffer of 2 MiB and notifies; a
 *    WRITE one byte past the registration ends FAILED and leaves the guard bytes alone;
 *  - it then pipelines one batch of 64 WRITEs of 16 KiB into the second half in reverse order, one of them refused
 *    in the middle (it crosses the registration's end): only that one FAILS, every other lands, and the
 *    notification after the batch arrives after its bytes; a READ brings the parent's bytes back;
 *  - the parent fills a stopped victim child's socket with a batch of 64 MiB, kills the victim: every task ends
 *    (FAILED where its bytes did not land), none hangs, and a later transfer on the broken segment FAILS.
 */
#include "transfer_engine_c.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BYTES (1u << 20)
#define PIECES 64
#define PIECE (BYTES / PIECES)
#define REFUSED 20 /* the piece of round 2 that crosses the registration's end */
#define VICTIM_BYTES (64u << 20)
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAILED: %s (line %d)\n", #c, __LINE__); exit(1); } } while (0)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The task's terminal status, or -1 when it is still running after timeout_s. */
static int wait_status(transfer_engine_t e, batch_id_t b, size_t task, double timeout_s) {
    double deadline = now_s() + timeout_s;
    for (;;) {
        struct transfer_status s;
        CHECK(getTransferStatus(e, b, task, &s) == 0);
        if (s.status == STATUS_COMPLETED || s.status == STATUS_FAILED) {
            return s.status;
        }
        if (now_s() > deadline) {
            return -1;
        }
        usleep(100);
    }
}

static unsigned char pattern(size_t i, int round) {
    return (unsigned char)(i * 31 + 7 + round * 13);
}

static transfer_engine_t engine(void) {
    transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
    CHECK(e != NULL && installTransport(e, "tcp", NULL) != NULL);
    return e;
}

static int writer(const char *peer, uint64_t remote) {
    transfer_engine_t e = engine();
    unsigned char *src = malloc(BYTES);
    for (size_t i = 0; i < BYTES; i++) {
        src[i] = pattern(i, 0);
    }
    CHECK(registerLocalMemory(e, src, BYTES, "cpu:0", 1) == 0);
    segment_id_t seg = openSegment(e, peer);
    CHECK(seg > 0);
    batch_id_t b = allocateBatchID(e, 2);
    struct transfer_request ok = {.opcode = OPCODE_WRITE, .source = src, .target_id = seg,
                                  .target_offset = remote, .length = BYTES};
    struct transfer_request past = ok;
    past.target_offset = remote + BYTES + 1;
    notify_msg_t note = {.name = "req-1", .msg = "done"};
    CHECK(submitTransfer(e, b, &past, 1) == 0);
    CHECK(wait_status(e, b, 0, 10) == STATUS_FAILED);
    CHECK(submitTransferWithNotify(e, b, &ok, 1, note) == 0);
    CHECK(wait_status(e, b, 1, 10) == STATUS_COMPLETED);
    CHECK(submitTransfer(e, b, &ok, 1) == 2);
    CHECK(freeBatchID(e, b) == 0);
    char go;
    CHECK(read(STDIN_FILENO, &go, 1) == 1); /* the parent has checked round 1 */

    /* Round 2, into the second half: piece i of the source lands at piece PIECES - 1 - i; piece REFUSED crosses
       the registration's end. */
    for (size_t i = 0; i < BYTES; i++) {
        src[i] = pattern(i, 2);
    }
    struct transfer_request pieces[PIECES];
    for (size_t i = 0; i < PIECES; i++) {
        pieces[i] = (struct transfer_request){.opcode = OPCODE_WRITE, .source = src + i * PIECE, .target_id = seg,
                                              .target_offset = remote + BYTES + (PIECES - 1 - i) * PIECE,
                                              .length = PIECE};
    }
    pieces[REFUSED].target_offset = remote + 2 * BYTES - PIECE / 2;
    b = allocateBatchID(e, PIECES + 1);
    notify_msg_t pieces_note = {.name = "req-2", .msg = "pieces"};
    CHECK(submitTransferWithNotify(e, b, pieces, PIECES, pieces_note) == 0);
    for (size_t i = 0; i < PIECES; i++) {
        CHECK(wait_status(e, b, i, 10) == (i == REFUSED ? STATUS_FAILED : STATUS_COMPLETED));
    }
    unsigned char *back = calloc(1, PIECE);
    CHECK(registerLocalMemory(e, back, PIECE, "cpu:0", 1) == 0);
    struct transfer_request read_back = {.opcode = OPCODE_READ, .source = back, .target_id = seg,
                                    .target_offset = remote + BYTES + (PIECES - 1) * PIECE, .length = PIECE};
    CHECK(submitTransfer(e, b, &read_back, 1) == 0);
    CHECK(wait_status(e, b, PIECES, 10) == STATUS_COMPLETED);
    CHECK(memcmp(back, src, PIECE) == 0);
    CHECK(freeBatchID(e, b) == 0);
    CHECK(read(STDIN_FILENO, &go, 1) == 1); /* the parent has checked round 2 */

    CHECK(openSegment(e, "127.0.0.1:1") < 0);
    destroyTransferEngine(e);
    free(src);
    free(back);
    return 0;
}

/* Registers VICTIM_BYTES, prints "<segment> <address>" on stdout, then waits to be killed. */
static int victim(void) {
    transfer_engine_t e = engine();
    unsigned char *dst = malloc(VICTIM_BYTES);
    CHECK(registerLocalMemory(e, dst, VICTIM_BYTES, "cpu:0", 1) == 0);
    char name[64];
    CHECK(getLocalIpAndPort(e, name, sizeof name) == 0);
    printf("%s %llu\n", name, (unsigned long long)(uintptr_t)dst);
    fflush(stdout);
    for (;;) {
        pause();
    }
}

/* Starts this program again with argv; its stdin and stdout are pipes to the caller. */
static pid_t spawn(char **argv, int *stdin_fd, int *stdout_fd) {
    int in[2];
    int out[2];
    CHECK(pipe(in) == 0 && pipe(out) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        close(in[1]);
        close(out[0]);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *stdin_fd = in[1];
    *stdout_fd = out[0];
    return pid;
}

/* A peer killed while a batch is moving: every task ends, at least the unsent ones FAILED, and nothing hangs. */
static void peer_killed_mid_transfer(transfer_engine_t e, char *self) {
    char *argv[] = {self, "victim", NULL};
    int in;
    int out;
    pid_t pid = spawn(argv, &in, &out);
    char line[128] = {0};
    CHECK(read(out, line, sizeof line - 1) > 0);
    close(in);
    close(out);
    char name[64];
    unsigned long long remote;
    CHECK(sscanf(line, "%63s %llu", name, &remote) == 2);
    segment_id_t seg = openSegment(e, name);
    CHECK(seg > 0);
    unsigned char *src = calloc(1, VICTIM_BYTES);
    CHECK(registerLocalMemory(e, src, VICTIM_BYTES, "cpu:0", 1) == 0);
    CHECK(kill(pid, SIGSTOP) == 0);
    struct transfer_request r[PIECES];
    for (size_t i = 0; i < PIECES; i++) {
        r[i] = (struct transfer_request){.opcode = OPCODE_WRITE, .source = src + i * (VICTIM_BYTES / PIECES),
                                         .target_id = seg, .target_offset = remote + i * (VICTIM_BYTES / PIECES),
                                         .length = VICTIM_BYTES / PIECES};
    }
    batch_id_t b = allocateBatchID(e, PIECES + 1);
    CHECK(submitTransfer(e, b, r, PIECES) == 0);
    usleep(100 * 1000);
    CHECK(wait_status(e, b, PIECES - 1, 0) == -1); /* a stopped peer cannot have taken 64 MiB */
    CHECK(kill(pid, SIGKILL) == 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
    int failed = 0;
    for (size_t i = 0; i < PIECES; i++) {
        int s = wait_status(e, b, i, 10);
        CHECK(s == STATUS_COMPLETED || s == STATUS_FAILED);
        failed += s == STATUS_FAILED;
    }
    CHECK(failed > 0);
    CHECK(submitTransfer(e, b, r, 1) == 0);
    CHECK(wait_status(e, b, PIECES, 10) == STATUS_FAILED);
    CHECK(freeBatchID(e, b) == 0);
    CHECK(openSegment(e, name) < 0); /* the broken segment is not reused, and nobody listens there now */
    CHECK(unregisterLocalMemory(e, src) == 0);
    free(src);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "child") == 0) {
        return writer(argv[2], strtoull(argv[3], NULL, 10));
    }
    if (argc == 2 && strcmp(argv[1], "victim") == 0) {
        return victim();
    }
    transfer_engine_t e = engine();
    char name[64];
    CHECK(getLocalIpAndPort(e, name, sizeof name) == 0);
    unsigned char *dst = calloc(1, 2 * BYTES + 64);
    CHECK(registerLocalMemory(e, dst + 32, 2 * BYTES, "cpu:0", 1) == 0);
    CHECK(registerLocalMemory(e, dst + 40, 8, "cpu:0", 1) == -7);
    char remote[32];
    snprintf(remote, sizeof remote, "%llu", (unsigned long long)(uintptr_t)(dst + 32));
    char *child_argv[] = {argv[0], "child", name, remote, NULL};
    int child_in;
    int child_out;
    pid_t pid = spawn(child_argv, &child_in, &child_out);
    const char *expect[] = {"req-1", "req-2"};
    for (int n = 0; n < 2; n++) {
        int size = 0;
        notify_msg_t *notes = NULL;
        for (int tries = 0; tries < 20000 && size == 0; tries++) {
            freeNotifsMsgBuf(notes, size);
            notes = getNotifsFromEngine(e, &size);
            if (size == 0) {
                usleep(500);
            }
        }
        CHECK(size == 1 && strcmp(notes[0].name, expect[n]) == 0);
        freeNotifsMsgBuf(notes, size);
        /* The notification comes after the bytes submitted before it. */
        for (size_t i = 0; i < BYTES; i++) {
            if (n == 0) {
                CHECK(dst[32 + i] == pattern(i, 0));
            } else {
                size_t piece = PIECES - 1 - i / PIECE;
                CHECK(dst[32 + BYTES + i] == (piece == REFUSED ? 0 : pattern(piece * PIECE + i % PIECE, 2)));
            }
        }
        for (size_t i = 0; i < 32; i++) {
            CHECK(dst[i] == 0 && dst[32 + 2 * BYTES + i] == 0);
        }
        CHECK(write(child_in, "c", 1) == 1); /* checked: the writer may go on */
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(child_in);
    close(child_out);
    peer_killed_mid_transfer(e, argv[0]);
    CHECK(unregisterLocalMemory(e, dst + 32) == 0);
    destroyTransferEngine(e);
    free(dst);
    puts("te_double_two_process_test: ok");
    return 0;
}
