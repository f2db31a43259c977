/*
 * The C ABI of Mooncake Store's libmooncake_store.so, written from kvconnector's spec
 * (shared/spec/mooncake-store.md), for the kvconnector TEST DOUBLE in this folder.
 *
 * Conventions: 0 is ok and a negative value is a Mooncake error code (-1 also means a NULL
 * argument). String arguments are copied during the call. Sizes are in bytes.
 */
#ifndef KVCONNECTOR_MOONCAKE_STORE_C_H
#define KVCONNECTOR_MOONCAKE_STORE_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MOONCAKE_STORE_API __attribute__((visibility("default")))
#else
#define MOONCAKE_STORE_API
#endif

typedef void *mooncake_store_t;

typedef struct mooncake_replicate_config {
    size_t replica_num;
    int with_soft_pin;
    int with_hard_pin;
    const char **preferred_segments;
    size_t preferred_segments_count;
} mooncake_replicate_config_t;

MOONCAKE_STORE_API mooncake_store_t mooncake_store_create(void);
MOONCAKE_STORE_API void mooncake_store_destroy(mooncake_store_t store);
MOONCAKE_STORE_API int mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
                                            const char *metadata_server, uint64_t global_segment_size,
                                            uint64_t local_buffer_size, const char *protocol,
                                            const char *device_name, const char *master_server_addr);
MOONCAKE_STORE_API int mooncake_store_init_all(mooncake_store_t store, const char *protocol,
                                               const char *device_name, uint64_t mount_segment_size);
MOONCAKE_STORE_API int mooncake_store_health_check(mooncake_store_t store);

MOONCAKE_STORE_API int mooncake_store_put(mooncake_store_t store, const char *key, const void *value,
                                          size_t size, const mooncake_replicate_config_t *config);
MOONCAKE_STORE_API int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer,
                                               size_t size, const mooncake_replicate_config_t *config);
MOONCAKE_STORE_API int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers,
                                                     const size_t *sizes, size_t count,
                                                     const mooncake_replicate_config_t *config,
                                                     int *results_out);

MOONCAKE_STORE_API int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer,
                                                   size_t size);
MOONCAKE_STORE_API int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers,
                                                     const size_t *sizes, size_t count, int64_t *results_out);

MOONCAKE_STORE_API int mooncake_store_is_exist(mooncake_store_t store, const char *key);
MOONCAKE_STORE_API int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count,
                                                     int *results_out);
MOONCAKE_STORE_API int64_t mooncake_store_get_size(mooncake_store_t store, const char *key);
MOONCAKE_STORE_API int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len);

MOONCAKE_STORE_API int mooncake_store_remove(mooncake_store_t store, const char *key, int force);
MOONCAKE_STORE_API int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force);
MOONCAKE_STORE_API int64_t mooncake_store_remove_all(mooncake_store_t store, int force);

MOONCAKE_STORE_API int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size);
MOONCAKE_STORE_API int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer);

#ifdef __cplusplus
}
#endif

#endif
