/*
 * The C ABI of Mooncake's Transfer Engine (transfer_engine_c.h), written from kvconnector's spec
 * (shared/spec/mooncake-transfer-engine.md) for the kvconnector TEST DOUBLE in this folder.
 * Only the functions that kvconnector binds are declared.
 *
 * Conventions: the int functions return 0 or a negative code; submitTransfer*, getTransferStatus
 * and freeBatchID return 0 or a positive one (1 invalid argument, 2 too many requests, 4 busy).
 * String arguments may be freed once a call returns. Sizes and offsets are in bytes.
 */
#ifndef KVCONNECTOR_TRANSFER_ENGINE_C_H
#define KVCONNECTOR_TRANSFER_ENGINE_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TE_API __attribute__((visibility("default")))
#else
#define TE_API
#endif

typedef int32_t segment_id_t;
typedef uint64_t batch_id_t;
typedef void *transfer_engine_t;
typedef void *transport_t;

#define LOCAL_SEGMENT (0)
#define INVALID_BATCH UINT64_MAX

#define OPCODE_READ (0)
#define OPCODE_WRITE (1)

/* 40 bytes: 4 bytes of padding after opcode and after target_id (a file id in newer versions). */
struct transfer_request {
    int opcode;
    void *source;
    segment_id_t target_id;
    uint32_t reserved;
    uint64_t target_offset; /* the peer's virtual address */
    uint64_t length;
};

#define STATUS_WAITING (0)
#define STATUS_PENDING (1)
#define STATUS_INVALID (2)
#define STATUS_CANCELED (3)
#define STATUS_COMPLETED (4)
#define STATUS_TIMEOUT (5)
#define STATUS_FAILED (6)

/* 16 bytes. */
struct transfer_status {
    int status;
    uint64_t transferred_bytes;
};

typedef struct notify_msg {
    char *name;
    char *msg;
} notify_msg_t;

typedef struct buffer_entry {
    void *addr;
    size_t length;
} buffer_entry_t;

TE_API transfer_engine_t createTransferEngine(const char *metadata_conn_string, const char *local_server_name,
                                              const char *ip_or_host_name, uint64_t rpc_port, int auto_discover);
TE_API void destroyTransferEngine(transfer_engine_t engine);
TE_API int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len);
TE_API transport_t installTransport(transfer_engine_t engine, const char *proto, void **args);
TE_API int uninstallTransport(transfer_engine_t engine, const char *proto);

TE_API int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
                               int remote_accessible);
TE_API int unregisterLocalMemory(transfer_engine_t engine, void *addr);
TE_API int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list, size_t buffer_len,
                                    const char *location);
TE_API int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list, size_t addr_len);

TE_API segment_id_t openSegment(transfer_engine_t engine, const char *segment_name);
TE_API segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name);
TE_API int closeSegment(transfer_engine_t engine, segment_id_t segment_id);
TE_API int syncSegmentCache(transfer_engine_t engine);

TE_API batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size);
TE_API int freeBatchID(transfer_engine_t engine, batch_id_t batch_id);
TE_API int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries,
                          size_t count);
TE_API int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id,
                                    struct transfer_request *entries, size_t count, notify_msg_t notify_msg);
TE_API int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
                             struct transfer_status *status);

TE_API notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size);
TE_API int freeNotifsMsgBuf(notify_msg_t *msg, int size);
TE_API int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id, notify_msg_t notify_msg);

/*
 * Not in Mooncake: the location string a registration covering addr was made with, copied into buf
 * (NUL-terminated). 0, or -1 when no registration covers addr or buf is too small. Tests use it to
 * check that "cuda:N" reaches the engine unchanged.
 */
TE_API int kvc_te_double_registration_location(transfer_engine_t engine, const void *addr, char *buf,
                                               size_t buf_len);

#ifdef __cplusplus
}
#endif

#endif
