/*
 * Stress test of the Mooncake store TEST DOUBLE itself: 8 threads put, get, lease, remove and
 * remove by regex on one handle whose pool is small enough to evict. Every value read back must be
 * whole (one fill byte throughout). Run by ctest; build with -fsanitize=thread or address to check
 * the double for races and leaks (see native/README.md).
 */
#include "store_c.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8
#define ITERATIONS 2000
#define SLOT 65536

static mooncake_store_t store;
static unsigned char *region;
static int failed;

static void fail(const char *what, long long code) {
    fprintf(stderr, "double_stress_test: %s returned %lld\n", what, code);
    __atomic_store_n(&failed, 1, __ATOMIC_SEQ_CST);
}

static void *worker(void *arg) {
    long t = (long)arg;
    unsigned char *mine = region + t * 2 * SLOT;
    unsigned char *back = mine + SLOT;
    char key[64];
    for (int i = 0; i < ITERATIONS && !__atomic_load_n(&failed, __ATOMIC_SEQ_CST); i++) {
        snprintf(key, sizeof key, "k-%ld-%d", t, i % 50);
        size_t n = 1 + (size_t)((t * 7919 + i * 104729) % (SLOT - 1));
        unsigned char fill = (unsigned char)(t * 31 + i);
        memset(mine, fill, n);
        int rc = mooncake_store_put_from(store, key, mine, n, NULL);
        if (rc != 0 && rc != -200) {
            fail("put_from", rc);
        }
        int64_t r = mooncake_store_get_into(store, key, back, SLOT);
        if (r > 0) {
            for (int64_t j = 1; j < r; j++) {
                if (back[j] != back[0]) {
                    fail("a torn get_into at byte", j);
                    break;
                }
            }
        } else if (r != -704) {
            fail("get_into", r);
        }
        if (mooncake_store_is_exist(store, key) < 0) {
            fail("is_exist", -1);
        }
        rc = mooncake_store_remove(store, key, i % 2);
        if (rc != 0 && rc != -704 && rc != -706) {
            fail("remove", rc);
        }
        if (i % 100 == 0 && mooncake_store_remove_by_regex(store, "^k-1-", 1) < 0) {
            fail("remove_by_regex", -1);
        }
    }
    return NULL;
}

int main(void) {
    store = mooncake_store_create();
    if (store == NULL || mooncake_store_setup(store, "127.0.0.1", "P2PHANDSHAKE", 1u << 20, 0, "tcp", "",
                                              "127.0.0.1:1") != 0) {
        fprintf(stderr, "double_stress_test: setup failed\n");
        return 1;
    }
    region = malloc((size_t)THREADS * 2 * SLOT);
    if (region == NULL || mooncake_store_register_buffer(store, region, (size_t)THREADS * 2 * SLOT) != 0) {
        fprintf(stderr, "double_stress_test: register_buffer failed\n");
        return 1;
    }
    pthread_t threads[THREADS];
    for (long t = 0; t < THREADS; t++) {
        pthread_create(&threads[t], NULL, worker, (void *)t);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }
    if (mooncake_store_unregister_buffer(store, region) != 0) {
        fail("unregister_buffer", -1);
    }
    mooncake_store_destroy(store);
    free(region);
    return failed;
}
