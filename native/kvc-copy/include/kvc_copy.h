/*
 * kvc_copy: a copy that sums the bytes it moves, with the raw format's word sum, in one pass over the source and
 * with non-temporal stores into the destination. Bound by connector-api's dev.kvconnector.memory.NativeCopy.
 */
#ifndef KVC_COPY_H
#define KVC_COPY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version NativeCopy checks before it binds kvc_copy_sum. */
#define KVC_COPY_ABI 1

/* KVC_COPY_ABI. */
int32_t kvc_copy_abi(void);

/*
 * 1 when this CPU runs kvc_copy_sum's streaming path (AVX2 loads and non-temporal stores), 0 when only the portable
 * loop is there (the Java copy is as fast then, and NativeCopy does not use this library).
 */
int32_t kvc_copy_streaming(void);

/*
 * Copies n bytes from src + src_offset to dst + dst_offset (the ranges must not overlap) and returns the word sum of
 * those bytes as the payload bytes from payload position `position` on: the bytes read as little-endian 32-bit words,
 * word k of the payload being at positions [4k, 4k + 4); the words at even k summed apart from those at odd k. The
 * result holds the even sum modulo 2^32 in its low 32 bits and the odd sum modulo 2^32 in its high 32 bits.
 *
 * Stores that reach the streaming path are non-temporal; the call ends with a store fence, so every byte is visible
 * to other threads and processes once it returns.
 */
uint64_t kvc_copy_sum(const void *src, uint64_t src_offset, void *dst, uint64_t dst_offset, uint64_t n,
                      uint64_t position);

#ifdef __cplusplus
}
#endif

#endif
