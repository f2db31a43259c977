/*
 * TEST DOUBLE of Mooncake Store's libmooncake_store.so. It is NOT Mooncake: no master, no
 * transfer engine, no network. It exports the same mooncake_store_* symbols with the same
 * signatures (include/store_c.h) and reproduces the behaviour that kvconnector relies on, as
 * described in shared/spec/mooncake-store.md, so that the Java bindings can be tested in CI:
 *
 *  - objects live in memory, in a pool shared by every handle set up with the same master
 *    address (as clients of one master share one pool); the pool's capacity is the sum of the
 *    attached handles' global_segment_size, or MOONCAKE_DOUBLE_CAPACITY (bytes) when set;
 *  - a put on an existing key keeps the OLD value and returns 0;
 *  - is_exist and every get grant a lease of MOONCAKE_DOUBLE_LEASE_MS (default 10000 ms);
 *    a leased object is neither removed without force (-706) nor evicted;
 *  - a put that finds no space evicts about 5% of the objects (leased and hard-pinned ones
 *    never, soft-pinned ones last, least recently used first) and still returns -200, like the
 *    real store, whose eviction frees space for a retry; a put that lifts usage above 90%
 *    evicts about 5% as well;
 *  - put_from, get_into and their batch forms need buffers inside a registered range and fail
 *    with -800 (TRANSFER_FAIL) otherwise: stricter than the real store over TCP, as strict as
 *    RDMA, so that a missing registration shows up in tests;
 *  - remove_by_regex uses POSIX extended regular expressions and matches anywhere in the key;
 *    the real store uses ECMAScript syntax (\d, lazy quantifiers and look-ahead differ);
 *  - calls before setup return -601 (ILLEGAL_CLIENT) and init_all returns -1012 (NOT_SUPPORTED);
 *  - with MOONCAKE_DOUBLE_MASTER_RETRY_MS set (above 0), setup imitates upstream's client setup against a master
 *    it cannot reach: it opens a TCP connection to the master address, and when local_hostname has no port it
 *    tries SETUP_RETRIES times, sleeping that many ms after each failure (upstream: 20 tries of about 4.4 s), then
 *    returns -900 (RPC_FAIL); with a port it tries once. Unset (the default), no connection is made, as before;
 *  - -703 (replica not ready) never happens: puts complete within the call.
 *
 * One mutex per pool serialises object access; registrations have a rwlock per handle.
 */
#include "store_c.h"

#include <netdb.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    RC_OK = 0,
    RC_INTERNAL = -1,
    RC_NO_AVAILABLE_HANDLE = -200,
    RC_INVALID_KEY = -400,
    RC_INVALID_PARAMS = -600,
    RC_ILLEGAL_CLIENT = -601,
    RC_OBJECT_NOT_FOUND = -704,
    RC_OBJECT_HAS_LEASE = -706,
    RC_TRANSFER_FAIL = -800,
    RC_RPC_FAIL = -900,
    RC_NOT_SUPPORTED = -1012
};

#define BUCKETS 4096u
#define DEFAULT_LEASE_MS 10000
#define DEFAULT_MASTER "127.0.0.1:50051"
#define EVICT_PERCENT 5
#define HIGH_WATERMARK_PERCENT 90
#define SETUP_RETRIES 20

typedef struct object {
    struct object *next;
    char *key;
    unsigned char *data;
    size_t size;
    int64_t lease_until_ms;
    uint64_t last_access;
    int soft_pin;
    int hard_pin;
} object_t;

typedef struct pool {
    struct pool *next;
    char *master;
    int refs;
    pthread_mutex_t lock;
    object_t *buckets[BUCKETS];
    size_t count;
    uint64_t used;
    uint64_t segment_sum;
    uint64_t capacity_override;
    int64_t lease_ms;
    uint64_t tick;
} pool_t;

typedef struct region {
    struct region *next;
    uintptr_t start;
    size_t size;
} region_t;

typedef struct handle {
    pthread_rwlock_t regions_lock;
    region_t *regions;
    pool_t *pool;
    uint64_t segment_size;
    uint64_t local_buffer_size;
    int port;
    int ready;
} handle_t;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_t *pools;
static unsigned next_port;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') {
        return fallback;
    }
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    return (end != NULL && *end == '\0') ? (uint64_t)n : fallback;
}

static uint32_t hash_key(const char *key) {
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h = (h ^ *p) * 16777619u;
    }
    return h % BUCKETS;
}

static uint64_t capacity_of(const pool_t *p) {
    return p->capacity_override != 0 ? p->capacity_override : p->segment_sum;
}

static object_t **find_slot(pool_t *p, const char *key) {
    object_t **slot = &p->buckets[hash_key(key)];
    while (*slot != NULL && strcmp((*slot)->key, key) != 0) {
        slot = &(*slot)->next;
    }
    return slot;
}

static void free_object(object_t *o) {
    free(o->key);
    free(o->data);
    free(o);
}

/* Unlinks the object in *slot, frees it and updates the pool's accounting. */
static void drop_slot(pool_t *p, object_t **slot) {
    object_t *o = *slot;
    *slot = o->next;
    p->used -= o->size;
    p->count--;
    free_object(o);
}

static int leased(const object_t *o, int64_t now) {
    return o->lease_until_ms > now;
}

static int evict_order(const void *a, const void *b) {
    const object_t *x = *(object_t *const *)a;
    const object_t *y = *(object_t *const *)b;
    if (x->soft_pin != y->soft_pin) {
        return x->soft_pin - y->soft_pin;
    }
    return x->last_access < y->last_access ? -1 : x->last_access > y->last_access;
}

/*
 * Evicts at least EVICT_PERCENT of the objects (at least one) and until need_bytes are free,
 * never a leased or hard-pinned object, nor keep. Caller holds p->lock.
 */
static void evict(pool_t *p, uint64_t need_bytes, const object_t *keep) {
    if (p->count == 0) {
        return;
    }
    object_t **candidates = malloc(p->count * sizeof(object_t *));
    if (candidates == NULL) {
        return;
    }
    int64_t now = now_ms();
    size_t n = 0;
    for (unsigned b = 0; b < BUCKETS; b++) {
        for (object_t *o = p->buckets[b]; o != NULL; o = o->next) {
            if (o != keep && !o->hard_pin && !leased(o, now)) {
                candidates[n++] = o;
            }
        }
    }
    qsort(candidates, n, sizeof(object_t *), evict_order);
    size_t target = p->count * EVICT_PERCENT / 100;
    if (target == 0) {
        target = 1;
    }
    uint64_t cap = capacity_of(p);
    for (size_t i = 0; i < n; i++) {
        int enough_space = cap >= p->used && cap - p->used >= need_bytes;
        if (i >= target && enough_space) {
            break;
        }
        drop_slot(p, find_slot(p, candidates[i]->key));
    }
    free(candidates);
}

static pool_t *attach_pool(const char *master, uint64_t segment_size) {
    pthread_mutex_lock(&pools_lock);
    pool_t *p = pools;
    while (p != NULL && strcmp(p->master, master) != 0) {
        p = p->next;
    }
    if (p == NULL) {
        p = calloc(1, sizeof(pool_t));
        if (p == NULL || (p->master = strdup(master)) == NULL) {
            free(p);
            pthread_mutex_unlock(&pools_lock);
            return NULL;
        }
        pthread_mutex_init(&p->lock, NULL);
        p->capacity_override = env_u64("MOONCAKE_DOUBLE_CAPACITY", 0);
        p->lease_ms = (int64_t)env_u64("MOONCAKE_DOUBLE_LEASE_MS", DEFAULT_LEASE_MS);
        p->next = pools;
        pools = p;
    }
    p->refs++;
    pthread_mutex_lock(&p->lock);
    p->segment_sum += segment_size;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&pools_lock);
    return p;
}

static void detach_pool(pool_t *p, uint64_t segment_size) {
    pthread_mutex_lock(&pools_lock);
    pthread_mutex_lock(&p->lock);
    p->segment_sum -= segment_size;
    pthread_mutex_unlock(&p->lock);
    if (--p->refs == 0) {
        pool_t **link = &pools;
        while (*link != p) {
            link = &(*link)->next;
        }
        *link = p->next;
        for (unsigned b = 0; b < BUCKETS; b++) {
            while (p->buckets[b] != NULL) {
                drop_slot(p, &p->buckets[b]);
            }
        }
        pthread_mutex_destroy(&p->lock);
        free(p->master);
        free(p);
    }
    pthread_mutex_unlock(&pools_lock);
}

/* Whether [addr, addr + size) lies inside one registered range of h. */
static int is_registered(handle_t *h, const void *addr, size_t size) {
    uintptr_t start = (uintptr_t)addr;
    int found = 0;
    pthread_rwlock_rdlock(&h->regions_lock);
    for (region_t *r = h->regions; r != NULL && !found; r = r->next) {
        found = start >= r->start && size <= r->size && start - r->start <= r->size - size;
    }
    pthread_rwlock_unlock(&h->regions_lock);
    return found;
}

static int check_ready(const handle_t *h) {
    return h->ready ? RC_OK : RC_ILLEGAL_CLIENT;
}

static int do_put(handle_t *h, const char *key, const void *value, size_t size,
                  const mooncake_replicate_config_t *cfg, int zero_copy) {
    if (h == NULL || key == NULL || (value == NULL && size > 0)) {
        return RC_INTERNAL;
    }
    int rc = check_ready(h);
    if (rc != RC_OK) {
        return rc;
    }
    if (cfg != NULL && cfg->replica_num == 0) {
        return RC_INVALID_PARAMS;
    }
    if (*key == '\0') {
        return RC_INVALID_KEY;
    }
    if (size == 0) {
        return RC_OK;
    }
    if (!zero_copy && size > h->local_buffer_size) {
        return RC_INVALID_PARAMS;
    }
    if (zero_copy && !is_registered(h, value, size)) {
        return RC_TRANSFER_FAIL;
    }
    object_t *o = calloc(1, sizeof(object_t));
    if (o == NULL || (o->key = strdup(key)) == NULL || (o->data = malloc(size)) == NULL) {
        if (o != NULL) {
            free_object(o);
        }
        return RC_INTERNAL;
    }
    o->size = size;
    o->soft_pin = cfg != NULL && cfg->with_soft_pin;
    o->hard_pin = cfg != NULL && cfg->with_hard_pin;
    memcpy(o->data, value, size);

    pool_t *p = h->pool;
    pthread_mutex_lock(&p->lock);
    object_t **slot = find_slot(p, key);
    if (*slot != NULL) {
        pthread_mutex_unlock(&p->lock);
        free_object(o);
        return RC_OK;
    }
    uint64_t cap = capacity_of(p);
    if (cap < p->used || cap - p->used < size) {
        evict(p, size, NULL);
        pthread_mutex_unlock(&p->lock);
        free_object(o);
        return RC_NO_AVAILABLE_HANDLE;
    }
    o->last_access = ++p->tick;
    o->next = NULL;
    *slot = o;
    p->count++;
    p->used += size;
    if (p->used * 100 > cap * HIGH_WATERMARK_PERCENT) {
        evict(p, 0, o);
    }
    pthread_mutex_unlock(&p->lock);
    return RC_OK;
}

static int64_t do_get_into(handle_t *h, const char *key, void *buffer, size_t size) {
    if (h == NULL || key == NULL || (buffer == NULL && size > 0)) {
        return RC_INTERNAL;
    }
    int rc = check_ready(h);
    if (rc != RC_OK) {
        return rc;
    }
    if (size > 0 && !is_registered(h, buffer, size)) {
        return RC_TRANSFER_FAIL;
    }
    pool_t *p = h->pool;
    pthread_mutex_lock(&p->lock);
    object_t *o = *find_slot(p, key);
    if (o == NULL) {
        pthread_mutex_unlock(&p->lock);
        return RC_OBJECT_NOT_FOUND;
    }
    /* The real client leases the object when it reads the replica list, before it looks at the buffer. */
    o->lease_until_ms = now_ms() + p->lease_ms;
    o->last_access = ++p->tick;
    if (o->size > size) {
        pthread_mutex_unlock(&p->lock);
        return RC_INVALID_PARAMS;
    }
    memcpy(buffer, o->data, o->size);
    int64_t n = (int64_t)o->size;
    pthread_mutex_unlock(&p->lock);
    return n;
}

static int do_is_exist(handle_t *h, const char *key) {
    if (h == NULL || key == NULL) {
        return RC_INTERNAL;
    }
    int rc = check_ready(h);
    if (rc != RC_OK) {
        return rc;
    }
    pool_t *p = h->pool;
    pthread_mutex_lock(&p->lock);
    object_t *o = *find_slot(p, key);
    if (o != NULL) {
        o->lease_until_ms = now_ms() + p->lease_ms;
    }
    pthread_mutex_unlock(&p->lock);
    return o != NULL;
}

mooncake_store_t mooncake_store_create(void) {
    handle_t *h = calloc(1, sizeof(handle_t));
    if (h == NULL) {
        return NULL;
    }
    pthread_rwlock_init(&h->regions_lock, NULL);
    return h;
}

void mooncake_store_destroy(mooncake_store_t store) {
    handle_t *h = store;
    if (h == NULL) {
        return;
    }
    if (h->ready) {
        detach_pool(h->pool, h->segment_size);
    }
    while (h->regions != NULL) {
        region_t *r = h->regions;
        h->regions = r->next;
        free(r);
    }
    pthread_rwlock_destroy(&h->regions_lock);
    free(h);
}

/* Whether a TCP connection to "host:port" (or "[v6]:port") opens; the connection is closed at once. */
static int master_reachable(const char *address) {
    char host[256];
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= sizeof host) {
        return 0;
    }
    size_t n = (size_t)(colon - address);
    memcpy(host, address, n);
    host[n] = '\0';
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *found = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &found) != 0) {
        return 0;
    }
    int ok = 0;
    for (struct addrinfo *a = found; a != NULL && !ok; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0) {
            ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
            close(fd);
        }
    }
    freeaddrinfo(found);
    return ok;
}

/* Upstream's retry loop against an unreachable master, when MOONCAKE_DOUBLE_MASTER_RETRY_MS asks for it. */
static int imitate_master_connect(const char *master, int has_port) {
    uint64_t delay_ms = env_u64("MOONCAKE_DOUBLE_MASTER_RETRY_MS", 0);
    if (delay_ms == 0) {
        return RC_OK;
    }
    int tries = has_port ? 1 : SETUP_RETRIES;
    for (int i = 0; i < tries; i++) {
        if (master_reachable(master)) {
            return RC_OK;
        }
        if (!has_port) {
            struct timespec pause = {(time_t)(delay_ms / 1000), (long)(delay_ms % 1000) * 1000000L};
            nanosleep(&pause, NULL);
        }
    }
    return RC_RPC_FAIL;
}

int mooncake_store_setup(mooncake_store_t store, const char *local_hostname, const char *metadata_server,
                         uint64_t global_segment_size, uint64_t local_buffer_size, const char *protocol,
                         const char *device_name, const char *master_server_addr) {
    handle_t *h = store;
    (void)device_name;
    if (h == NULL) {
        return RC_INTERNAL;
    }
    if (h->ready || local_hostname == NULL || *local_hostname == '\0' || metadata_server == NULL
        || *metadata_server == '\0') {
        return RC_INVALID_PARAMS;
    }
    if (protocol != NULL && strcmp(protocol, "tcp") != 0 && strcmp(protocol, "rdma") != 0) {
        return RC_INVALID_PARAMS;
    }
    const char *colon = strrchr(local_hostname, ':');
    int port = 0;
    if (colon != NULL) {
        char *end = NULL;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end != '\0' || v <= 0 || v > 65535) {
            return RC_INVALID_PARAMS;
        }
        port = (int)v;
    } else {
        pthread_mutex_lock(&pools_lock);
        port = 12300 + (int)(next_port++ % 2001u);
        pthread_mutex_unlock(&pools_lock);
    }
    const char *master = master_server_addr != NULL ? master_server_addr : DEFAULT_MASTER;
    int rc = imitate_master_connect(master, colon != NULL);
    if (rc != RC_OK) {
        return rc;
    }
    pool_t *p = attach_pool(master, global_segment_size);
    if (p == NULL) {
        return RC_INTERNAL;
    }
    h->pool = p;
    h->segment_size = global_segment_size;
    h->local_buffer_size = local_buffer_size;
    h->port = port;
    h->ready = 1;
    return RC_OK;
}

int mooncake_store_init_all(mooncake_store_t store, const char *protocol, const char *device_name,
                            uint64_t mount_segment_size) {
    (void)protocol;
    (void)device_name;
    (void)mount_segment_size;
    return store == NULL ? RC_INTERNAL : RC_NOT_SUPPORTED;
}

int mooncake_store_health_check(mooncake_store_t store) {
    handle_t *h = store;
    if (h == NULL) {
        return RC_INTERNAL;
    }
    return h->ready ? 0 : 1;
}

int mooncake_store_put(mooncake_store_t store, const char *key, const void *value, size_t size,
                       const mooncake_replicate_config_t *config) {
    return do_put(store, key, value, size, config, 0);
}

int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
                            const mooncake_replicate_config_t *config) {
    return do_put(store, key, buffer, size, config, 1);
}

int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                                  size_t count, const mooncake_replicate_config_t *config, int *results_out) {
    if (store == NULL || keys == NULL || buffers == NULL || sizes == NULL || results_out == NULL) {
        return RC_INTERNAL;
    }
    for (size_t i = 0; i < count; i++) {
        if (keys[i] == NULL || (buffers[i] == NULL && sizes[i] > 0)) {
            return RC_INTERNAL;
        }
    }
    for (size_t i = 0; i < count; i++) {
        results_out[i] = do_put(store, keys[i], buffers[i], sizes[i], config, 1);
    }
    return RC_OK;
}

int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer, size_t size) {
    return do_get_into(store, key, buffer, size);
}

int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                                  size_t count, int64_t *results_out) {
    if (store == NULL || keys == NULL || buffers == NULL || sizes == NULL || results_out == NULL) {
        return RC_INTERNAL;
    }
    for (size_t i = 0; i < count; i++) {
        if (keys[i] == NULL || (buffers[i] == NULL && sizes[i] > 0)) {
            return RC_INTERNAL;
        }
    }
    for (size_t i = 0; i < count; i++) {
        results_out[i] = do_get_into(store, keys[i], buffers[i], sizes[i]);
    }
    return RC_OK;
}

int mooncake_store_is_exist(mooncake_store_t store, const char *key) {
    return do_is_exist(store, key);
}

int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count, int *results_out) {
    if (store == NULL || keys == NULL || results_out == NULL) {
        return RC_INTERNAL;
    }
    for (size_t i = 0; i < count; i++) {
        if (keys[i] == NULL) {
            return RC_INTERNAL;
        }
    }
    for (size_t i = 0; i < count; i++) {
        results_out[i] = do_is_exist(store, keys[i]);
    }
    return RC_OK;
}

int64_t mooncake_store_get_size(mooncake_store_t store, const char *key) {
    handle_t *h = store;
    if (h == NULL || key == NULL) {
        return RC_INTERNAL;
    }
    int rc = check_ready(h);
    if (rc != RC_OK) {
        return rc;
    }
    pthread_mutex_lock(&h->pool->lock);
    object_t *o = *find_slot(h->pool, key);
    int64_t size = o != NULL ? (int64_t)o->size : RC_OBJECT_NOT_FOUND;
    pthread_mutex_unlock(&h->pool->lock);
    return size;
}

int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len) {
    handle_t *h = store;
    if (h == NULL || buf_out == NULL || buf_len == 0) {
        return RC_INTERNAL;
    }
    int rc = check_ready(h);
    if (rc != RC_OK) {
        return rc;
    }
    char name[32];
    int n = snprintf(name, sizeof name, "127.0.0.1:%d", h->port);
    if (n < 0 || (size_t)n >= buf_len) {
        return RC_INTERNAL;
    }
    memcpy(buf_out, name, (size_t)n + 1);
    return RC_OK;
}

int mooncake_store_remove(mooncake_store_t store, const char *key, int force) {
    handle_t *h = store;
    if (h == NULL || key == NULL) {
        return RC_INTERNAL;
    }
    int rc = check_ready(h);
    if (rc != RC_OK) {
        return rc;
    }
    pool_t *p = h->pool;
    pthread_mutex_lock(&p->lock);
    object_t **slot = find_slot(p, key);
    if (*slot == NULL) {
        rc = RC_OBJECT_NOT_FOUND;
    } else if (!force && leased(*slot, now_ms())) {
        rc = RC_OBJECT_HAS_LEASE;
    } else {
        drop_slot(p, slot);
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* Removes every object whose key matches re (all when re is NULL) and is unleased or forced. */
static int64_t remove_matching(handle_t *h, const regex_t *re, int force) {
    pool_t *p = h->pool;
    int64_t removed = 0;
    pthread_mutex_lock(&p->lock);
    int64_t now = now_ms();
    for (unsigned b = 0; b < BUCKETS; b++) {
        object_t **slot = &p->buckets[b];
        while (*slot != NULL) {
            object_t *o = *slot;
            if ((re == NULL || regexec(re, o->key, 0, NULL, 0) == 0) && (force || !leased(o, now))) {
                drop_slot(p, slot);
                removed++;
            } else {
                slot = &o->next;
            }
        }
    }
    pthread_mutex_unlock(&p->lock);
    return removed;
}

int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force) {
    handle_t *h = store;
    if (h == NULL || pattern == NULL) {
        return RC_INTERNAL;
    }
    int rc = check_ready(h);
    if (rc != RC_OK) {
        return rc;
    }
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
        return RC_INVALID_PARAMS;
    }
    int64_t removed = remove_matching(h, &re, force);
    regfree(&re);
    return removed;
}

int64_t mooncake_store_remove_all(mooncake_store_t store, int force) {
    handle_t *h = store;
    if (h == NULL) {
        return RC_INTERNAL;
    }
    int rc = check_ready(h);
    return rc != RC_OK ? rc : remove_matching(h, NULL, force);
}

int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size) {
    handle_t *h = store;
    if (h == NULL || buffer == NULL || size == 0) {
        return RC_INTERNAL;
    }
    uintptr_t start = (uintptr_t)buffer;
    if (size > UINTPTR_MAX - start) {
        return RC_INVALID_PARAMS;
    }
    region_t *n = malloc(sizeof(region_t));
    if (n == NULL) {
        return RC_INTERNAL;
    }
    n->start = start;
    n->size = size;
    pthread_rwlock_wrlock(&h->regions_lock);
    for (region_t *r = h->regions; r != NULL; r = r->next) {
        if (start < r->start + r->size && r->start < start + size) {
            pthread_rwlock_unlock(&h->regions_lock);
            free(n);
            return RC_INVALID_PARAMS;
        }
    }
    n->next = h->regions;
    h->regions = n;
    pthread_rwlock_unlock(&h->regions_lock);
    return RC_OK;
}

int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer) {
    handle_t *h = store;
    if (h == NULL || buffer == NULL) {
        return RC_INTERNAL;
    }
    int rc = RC_INVALID_PARAMS;
    pthread_rwlock_wrlock(&h->regions_lock);
    for (region_t **link = &h->regions; *link != NULL; link = &(*link)->next) {
        if ((*link)->start == (uintptr_t)buffer) {
            region_t *r = *link;
            *link = r->next;
            free(r);
            rc = RC_OK;
            break;
        }
    }
    pthread_rwlock_unlock(&h->regions_lock);
    return rc;
}
