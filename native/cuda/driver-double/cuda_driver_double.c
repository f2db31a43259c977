/*
 * A TEST DOUBLE of the CUDA driver (libcuda.so.1) for machines without a GPU. It is NOT CUDA: it exports the
 * 31 driver functions kvconnector binds, with the driver's signatures, and keeps "device" memory in host memory
 * (a device pointer is a host address), so that connector-api's CudaDevice*Test classes exercise the Java
 * bindings, argument packing and error paths in CI. Kernel launches are emulated by name: the paged-KV
 * gather/scatter of paged_kv.cu, run thread block by thread block with the launched geometry, so a wrong grid,
 * block or argument layout gives wrong bytes here as it would on a GPU.
 *
 * Reproduced from the driver: calls before cuInit give CUDA_ERROR_NOT_INITIALIZED (3); memory, module and
 * stream calls without a current context (per thread) give CUDA_ERROR_INVALID_CONTEXT (201); allocations above
 * KVC_CUDA_DOUBLE_MEMORY bytes (default 16 GiB) give CUDA_ERROR_OUT_OF_MEMORY (2); freeing an unknown pointer gives
 * CUDA_ERROR_INVALID_VALUE (1); registering a range twice gives 712, unregistering an unregistered one 713; a
 * missing kernel gives CUDA_ERROR_NOT_FOUND (500); a vector access at an unaligned address gives
 * CUDA_ERROR_MISALIGNED_ADDRESS (716); more than 1024 threads per block gives
 * CUDA_ERROR_INVALID_VALUE (1). KVC_CUDA_DOUBLE_DEVICES=0 makes cuInit return CUDA_ERROR_NO_DEVICE (100).
 * Not reproduced: asynchrony (copies and launches complete before the call returns), peer access, real timing.
 * Only cuEventElapsedTime (no _v2) is exported, as by drivers before 12.8.
 *
 * Not in the driver: kvc_cuda_double_copied_bytes(direction) returns the bytes copied so far host-to-device (0) or
 * device-to-host (1), so tests can tell a path that stages through the host from one that does not (GPUDirect).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100, INVALID_DEVICE = 101,
       INVALID_CONTEXT = 201, INVALID_PTX = 218, INVALID_HANDLE = 400, NOT_FOUND = 500,
       HOST_MEMORY_ALREADY_REGISTERED = 712, HOST_MEMORY_NOT_REGISTERED = 713, MISALIGNED_ADDRESS = 716 };

#define MAX_TRACKED 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static int context_token;
static __thread void *current;
static void *allocations[MAX_TRACKED];
static struct { char *start; size_t bytes; } registered[MAX_TRACKED];

static unsigned long long copied[2];

struct event { double ms; };
struct module { char *ptx; };
struct function { int gather; int blocks; int vector; };

static long env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : fallback;
}

static int devices(void) { return (int) env_long("KVC_CUDA_DOUBLE_DEVICES", 1); }

static CUresult need_context(void) {
    if (!initialized) return NOT_INITIALIZED;
    return current ? OK : INVALID_CONTEXT;
}

static int track(void **table, void *p) {
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (!table[i]) { table[i] = p; return 1; }
    }
    return 0;
}

static int untrack(void **table, void *p) {
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (table[i] == p) { table[i] = NULL; return 1; }
    }
    return 0;
}

API CUresult cuInit(unsigned int flags) {
    if (flags != 0) return INVALID_VALUE;
    if (devices() <= 0) return NO_DEVICE;
    initialized = 1;
    return OK;
}

API CUresult cuDriverGetVersion(int *version) {
    if (!version) return INVALID_VALUE;
    *version = 12040;
    return OK;
}

API CUresult cuDeviceGetCount(int *count) {
    if (!initialized) return NOT_INITIALIZED;
    *count = devices();
    return OK;
}

API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!initialized) return NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= devices()) return INVALID_DEVICE;
    *device = ordinal;
    return OK;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice device) {
    if (!initialized) return NOT_INITIALIZED;
    if (device < 0 || device >= devices()) return INVALID_DEVICE;
    if (!name || len <= 0) return INVALID_VALUE;
    strncpy(name, "kvconnector CUDA driver TEST DOUBLE", (size_t) len - 1);
    name[len - 1] = '\0';
    return OK;
}

API CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    if (!initialized) return NOT_INITIALIZED;
    if (device < 0 || device >= devices()) return INVALID_DEVICE;
    switch (attribute) {
        case 16: *value = 4; return OK;          /* SMs */
        case 36: *value = 1000000; return OK;    /* memory clock, kHz */
        case 37: *value = 128; return OK;        /* bus width, bits */
        case 75: *value = 8; return OK;          /* compute capability 8.0 */
        case 76: *value = 0; return OK;
        default: return INVALID_VALUE;
    }
}

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
    if (!initialized) return NOT_INITIALIZED;
    if (device < 0 || device >= devices()) return INVALID_DEVICE;
    *bytes = (size_t) env_long("KVC_CUDA_DOUBLE_MEMORY", 16L << 30);
    return OK;
}

API CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice device) {
    if (!initialized) return NOT_INITIALIZED;
    if (device < 0 || device >= devices()) return INVALID_DEVICE;
    *ctx = &context_token;
    return OK;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    if (!initialized) return NOT_INITIALIZED;
    return device < 0 || device >= devices() ? INVALID_DEVICE : OK;
}

API CUresult cuCtxSetCurrent(void *ctx) {
    if (!initialized) return NOT_INITIALIZED;
    if (ctx && ctx != &context_token) return INVALID_CONTEXT;
    current = ctx;
    return OK;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    CUresult rc = need_context();
    if (rc) return rc;
    if (bytes == 0) return INVALID_VALUE;
    if (bytes > (size_t) env_long("KVC_CUDA_DOUBLE_MEMORY", 16L << 30)) return OUT_OF_MEMORY;
    void *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!p) return OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    int tracked = track(allocations, p);
    pthread_mutex_unlock(&lock);
    if (!tracked) { free(p); return OUT_OF_MEMORY; }
    *dptr = (CUdeviceptr) (uintptr_t) p;
    return OK;
}

API CUresult cuMemFree_v2(CUdeviceptr dptr) {
    CUresult rc = need_context();
    if (rc) return rc;
    pthread_mutex_lock(&lock);
    int found = untrack(allocations, (void *) (uintptr_t) dptr);
    pthread_mutex_unlock(&lock);
    if (!found) return INVALID_VALUE;
    free((void *) (uintptr_t) dptr);
    return OK;
}

API CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    CUresult rc = need_context();
    if (rc) return rc;
    (void) flags;
    if (bytes == 0) return INVALID_VALUE;
    *pp = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    return *pp ? OK : OUT_OF_MEMORY;
}

API CUresult cuMemFreeHost(void *p) {
    CUresult rc = need_context();
    if (rc) return rc;
    free(p);
    return OK;
}

API CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) {
    CUresult rc = need_context();
    if (rc) return rc;
    (void) flags;
    if (!p || bytes == 0) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    rc = OUT_OF_MEMORY;
    for (int i = 0; i < MAX_TRACKED; i++) {
        char *s = registered[i].start;
        if (s && (char *) p < s + registered[i].bytes && s < (char *) p + bytes) { rc = HOST_MEMORY_ALREADY_REGISTERED; break; }
    }
    if (rc == OUT_OF_MEMORY) {
        for (int i = 0; i < MAX_TRACKED; i++) {
            if (!registered[i].start) { registered[i].start = p; registered[i].bytes = bytes; rc = OK; break; }
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

API CUresult cuMemHostUnregister(void *p) {
    CUresult rc = need_context();
    if (rc) return rc;
    pthread_mutex_lock(&lock);
    rc = HOST_MEMORY_NOT_REGISTERED;
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (p && registered[i].start == p) { registered[i].start = NULL; rc = OK; break; }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static void count_copy(int direction, size_t bytes) {
    pthread_mutex_lock(&lock);
    copied[direction] += bytes;
    pthread_mutex_unlock(&lock);
}

API unsigned long long kvc_cuda_double_copied_bytes(int direction) {
    pthread_mutex_lock(&lock);
    unsigned long long n = direction == 0 || direction == 1 ? copied[direction] : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, void *stream) {
    CUresult rc = need_context();
    (void) stream;
    if (!rc && bytes) {
        memmove((void *) (uintptr_t) dst, src, bytes);
        count_copy(0, bytes);
    }
    return rc;
}

API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, void *stream) {
    CUresult rc = need_context();
    (void) stream;
    if (!rc && bytes) {
        memmove(dst, (const void *) (uintptr_t) src, bytes);
        count_copy(1, bytes);
    }
    return rc;
}

API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void *stream) {
    CUresult rc = need_context();
    (void) stream;
    if (!rc && bytes) memmove((void *) (uintptr_t) dst, (const void *) (uintptr_t) src, bytes);
    return rc;
}

API CUresult cuStreamCreate(void **stream, unsigned int flags) {
    CUresult rc = need_context();
    if (rc) return rc;
    if (flags > 1) return INVALID_VALUE;
    *stream = malloc(1);
    return *stream ? OK : OUT_OF_MEMORY;
}

API CUresult cuStreamSynchronize(void *stream) { (void) stream; return need_context(); }

API CUresult cuStreamDestroy_v2(void *stream) {
    CUresult rc = need_context();
    if (rc) return rc;
    if (!stream) return INVALID_HANDLE;
    free(stream);
    return OK;
}

API CUresult cuEventCreate(void **event, unsigned int flags) {
    CUresult rc = need_context();
    if (rc) return rc;
    if (flags > 0xf) return INVALID_VALUE;
    *event = calloc(1, sizeof(struct event));
    return *event ? OK : OUT_OF_MEMORY;
}

API CUresult cuEventRecord(void *event, void *stream) {
    CUresult rc = need_context();
    (void) stream;
    if (rc) return rc;
    if (!event) return INVALID_HANDLE;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ((struct event *) event)->ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    return OK;
}

API CUresult cuEventSynchronize(void *event) { return event ? need_context() : INVALID_HANDLE; }

API CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
    CUresult rc = need_context();
    if (rc) return rc;
    if (!start || !end) return INVALID_HANDLE;
    *ms = (float) (((struct event *) end)->ms - ((struct event *) start)->ms);
    return OK;
}

API CUresult cuEventDestroy_v2(void *event) {
    CUresult rc = need_context();
    if (rc) return rc;
    free(event);
    return OK;
}

API CUresult cuModuleLoadData(void **module, const void *image) {
    CUresult rc = need_context();
    if (rc) return rc;
    const char *ptx = image;
    if (!strstr(ptx, ".version") || !strstr(ptx, ".target")) return INVALID_PTX;
    struct module *m = malloc(sizeof *m);
    if (!m || !(m->ptx = strdup(ptx))) { free(m); return OUT_OF_MEMORY; }
    *module = m;
    return OK;
}

API CUresult cuModuleUnload(void *module) {
    CUresult rc = need_context();
    if (rc) return rc;
    struct module *m = module;
    if (!m) return INVALID_HANDLE;
    free(m->ptx);
    free(m);
    return OK;
}

API CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
    CUresult rc = need_context();
    if (rc) return rc;
    struct module *m = module;
    char declared[128];
    if (strlen(name) > 100) return NOT_FOUND;
    strcpy(declared, ".entry ");
    strcat(declared, name);
    strcat(declared, "(");
    if (!strstr(m->ptx, declared)) return NOT_FOUND;
    struct function f = {0, 0, 0};
    char dir[16], index[16];
    if (sscanf(name, "kvc_%15[a-z]_%15[a-z]_v%d", dir, index, &f.vector) != 3) return NOT_FOUND;
    f.gather = strcmp(dir, "gather") == 0;
    f.blocks = strcmp(index, "blocks") == 0;
    struct function *copy = malloc(sizeof *copy);
    if (!copy) return OUT_OF_MEMORY;
    *copy = f;
    *function = copy; /* leaked with the module on purpose: functions live as long as the process here */
    return OK;
}

/* Runs paged_kv.cu's by_slots/by_blocks for every (CTA, threadIdx.y) of the launch. */
API CUresult cuLaunchKernel(void *function, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                            unsigned int by, unsigned int bz, unsigned int shared, void *stream, void **params,
                            void **extra) {
    CUresult rc = need_context();
    (void) stream;
    if (rc) return rc;
    struct function *f = function;
    if (!f || !params || extra) return INVALID_VALUE;
    if (gx == 0 || gy == 0 || gz != 1 || bx == 0 || by == 0 || bz != 1 || (unsigned long) bx * by > 1024 || shared)
        return INVALID_VALUE;
    char *cache[2] = {*(char **) params[0], *(char **) params[1]};
    char *flat[2] = {*(char **) params[2], *(char **) params[3]};
    const void *index = *(void **) params[4];
    int block_size = *(int *) params[5];
    int tokens = *(int *) params[6];
    long long token_bytes = *(long long *) params[7];
    long long cache_slots = *(long long *) params[8];
    long long v = f->vector;
    long long copied = token_bytes / v * v;
    for (unsigned int y = 0; y < gy; y++) {
        if (gy > 2 || !cache[y] || !flat[y]) return INVALID_VALUE;
        for (unsigned long long cta = 0; cta < gx; cta++) {
            for (unsigned int ty = 0; ty < by; ty++) {
                long long token = (long long) (cta * by + ty);
                if (token >= tokens) continue;
                long long slot;
                if (f->blocks) {
                    int block = ((const int *) index)[token / block_size];
                    slot = block < 0 ? -1 : (long long) block * block_size + token % block_size;
                } else {
                    slot = ((const long long *) index)[token];
                }
                if (slot < 0 || slot >= cache_slots) continue;
                char *c = cache[y] + slot * token_bytes;
                char *fl = flat[y] + token * token_bytes;
                if ((uintptr_t) c % v || (uintptr_t) fl % v) return MISALIGNED_ADDRESS;
                if (f->gather) memcpy(fl, c, (size_t) copied); else memcpy(c, fl, (size_t) copied);
            }
        }
    }
    return OK;
}
