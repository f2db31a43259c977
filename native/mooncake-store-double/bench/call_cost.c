/*
 * The cost of one mooncake_store_get_size call on the test double, called from C: the floor against which the
 * Java FFM binding's per-call overhead is measured (benchmarks: MooncakeBindingBenchmark). Prints nanoseconds per
 * call, the median of 7 rounds of 200000 calls each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "store_c.h"

enum { ROUNDS = 7, CALLS = 200000 };

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    mooncake_store_t s = mooncake_store_create();
    if (s == NULL || mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 64u << 20, 1u << 20, "tcp", "",
                                          "127.0.0.1:50777") != 0) {
        fprintf(stderr, "call_cost: setup of the test double failed\n");
        return 1;
    }
    char value[64] = {0};
    if (mooncake_store_put(s, "kvc-bench-key", value, sizeof value, NULL) != 0) {
        fprintf(stderr, "call_cost: put failed\n");
        return 1;
    }
    double per_call[ROUNDS];
    volatile int64_t sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < CALLS; i++) {
            sink += mooncake_store_get_size(s, "kvc-bench-key");
        }
        per_call[r] = (now_ns() - t0) / CALLS;
    }
    qsort(per_call, ROUNDS, sizeof per_call[0], cmp);
    printf("get_size from C: %.1f ns per call (median of %d x %d calls; sink %lld)\n", per_call[ROUNDS / 2], ROUNDS,
           CALLS, (long long)sink);
    mooncake_store_destroy(s);
    return 0;
}
