/* kvc_copy_sum against the word sum's definition, byte by byte, over sizes, offsets and payload positions that
 * reach every path: the byte head and tail, the 8-byte words, the alignment steps and the streaming loop. */
#include "kvc_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t reference(const uint8_t *src, uint64_t n, uint64_t position) {
    uint64_t even = 0;
    uint64_t odd = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t p = position + i;
        uint64_t shifted = (uint64_t)src[i] << ((p & 3u) << 3);
        if ((p & 4u) == 0) {
            even += shifted;
        } else {
            odd += shifted;
        }
    }
    return ((odd & 0xFFFFFFFFull) << 32) | (even & 0xFFFFFFFFull);
}

int main(void) {
    if (kvc_copy_abi() != KVC_COPY_ABI) {
        fprintf(stderr, "kvc_copy_abi() = %d, header says %d\n", kvc_copy_abi(), KVC_COPY_ABI);
        return 1;
    }
    const size_t cap = 1u << 20;
    uint8_t *src = malloc(cap + 64);
    uint8_t *dst = malloc(cap + 64);
    uint8_t *want = malloc(cap + 64);
    if (src == NULL || dst == NULL || want == NULL) {
        return 1;
    }
    srand(7);
    for (size_t i = 0; i < cap + 64; i++) {
        src[i] = (uint8_t)rand();
    }
    const uint64_t sizes[] = {0, 1, 7, 8, 9, 31, 255, 256, 257, 1000, 4096, 32768, 65536 + 13, 1u << 19, cap};
    int failures = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (uint64_t src_off = 0; src_off < 40; src_off += 13) {
            for (uint64_t dst_off = 0; dst_off < 64; dst_off += 8) {
                for (uint64_t position = 0; position < 12; position += 3) {
                    uint64_t n = sizes[k];
                    memset(dst, 0xA5, cap + 64);
                    memcpy(want, dst, cap + 64);
                    memcpy(want + dst_off, src + src_off, n);
                    uint64_t got = kvc_copy_sum(src, src_off, dst, dst_off, n, position);
                    uint64_t expected = reference(src + src_off, n, position);
                    if (got != expected || memcmp(dst, want, cap + 64) != 0) {
                        fprintf(stderr, "n=%llu src_off=%llu dst_off=%llu position=%llu: sum %016llx, expected %016llx%s\n",
                                (unsigned long long)n, (unsigned long long)src_off, (unsigned long long)dst_off,
                                (unsigned long long)position, (unsigned long long)got, (unsigned long long)expected,
                                memcmp(dst, want, cap + 64) != 0 ? ", destination differs" : "");
                        failures++;
                    }
                }
            }
        }
    }
    printf("kvc_copy: streaming path %s; %d failures\n", kvc_copy_streaming() ? "on" : "off", failures);
    free(src);
    free(dst);
    free(want);
    return failures == 0 ? 0 : 1;
}
