/*
 * The fused copy and word sum of include/kvc_copy.h.
 *
 * Why native: the JDK copies 2.5 MiB and more with non-temporal stores, which skip reading the destination's cache
 * lines before writing them, but every smaller copy with ordinary stores; Java has no non-temporal store of its own.
 * A layer moves in blocks of tens of KiB, so in Java a whole request costs about 1.35x one large copy of the same
 * bytes before any checksum, and 1.5x with the sum over each piece added from cache. This loop reads each source
 * byte once, adds it to the sum from the register it was loaded into, and streams it to the destination: about
 * 1.07x one large copy. Measurements: benchmarks/results/REPORT.md.
 */
#include "kvc_copy.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define KVC_X86 1
#endif

#define LOW_WORD 0xFFFFFFFFull
/* Below this many bytes the streaming path's alignment steps and fence cost more than they save. */
#define STREAM_MIN_BYTES 256u

typedef struct {
    uint64_t even;
    uint64_t odd;
} sums;

int32_t kvc_copy_abi(void) {
    return KVC_COPY_ABI;
}

static void copy_bytes(const uint8_t *src, uint8_t *dst, uint64_t n, uint64_t position, sums *s) {
    for (uint64_t i = 0; i < n; i++) {
        uint8_t b = src[i];
        dst[i] = b;
        uint64_t shifted = (uint64_t)b << (((position + i) & 3u) << 3);
        if (((position + i) & 4u) == 0) {
            s->even += shifted;
        } else {
            s->odd += shifted;
        }
    }
}

/* n is a multiple of 8 and the payload position of src[0] a multiple of 8: each 8 bytes are an even, then an odd word. */
static void copy_words(const uint8_t *src, uint8_t *dst, uint64_t n, sums *s) {
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t v;
        memcpy(&v, src + i, 8);
        memcpy(dst + i, &v, 8);
        s->even += v & LOW_WORD;
        s->odd += v >> 32;
    }
}

#ifdef KVC_X86
int32_t kvc_copy_streaming(void) {
    return __builtin_cpu_supports("avx2") ? 1 : 0;
}

/* n is a multiple of 32, dst is 32-byte aligned and src[0] sits at a payload position that is a multiple of 8. */
__attribute__((target("avx2"))) static void stream_words(const uint8_t *src, uint8_t *dst, uint64_t n, sums *s) {
    const __m256i low = _mm256_set1_epi64x((long long)LOW_WORD);
    __m256i even0 = _mm256_setzero_si256();
    __m256i odd0 = _mm256_setzero_si256();
    __m256i even1 = _mm256_setzero_si256();
    __m256i odd1 = _mm256_setzero_si256();
    uint64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(src + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(src + i + 64));
        __m256i d = _mm256_loadu_si256((const __m256i *)(src + i + 96));
        _mm256_stream_si256((__m256i *)(dst + i), a);
        _mm256_stream_si256((__m256i *)(dst + i + 32), b);
        _mm256_stream_si256((__m256i *)(dst + i + 64), c);
        _mm256_stream_si256((__m256i *)(dst + i + 96), d);
        even0 = _mm256_add_epi64(even0, _mm256_and_si256(a, low));
        odd0 = _mm256_add_epi64(odd0, _mm256_srli_epi64(a, 32));
        even1 = _mm256_add_epi64(even1, _mm256_and_si256(b, low));
        odd1 = _mm256_add_epi64(odd1, _mm256_srli_epi64(b, 32));
        even0 = _mm256_add_epi64(even0, _mm256_and_si256(c, low));
        odd0 = _mm256_add_epi64(odd0, _mm256_srli_epi64(c, 32));
        even1 = _mm256_add_epi64(even1, _mm256_and_si256(d, low));
        odd1 = _mm256_add_epi64(odd1, _mm256_srli_epi64(d, 32));
    }
    for (; i < n; i += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + i));
        _mm256_stream_si256((__m256i *)(dst + i), a);
        even0 = _mm256_add_epi64(even0, _mm256_and_si256(a, low));
        odd0 = _mm256_add_epi64(odd0, _mm256_srli_epi64(a, 32));
    }
    uint64_t e[4];
    uint64_t o[4];
    _mm256_storeu_si256((__m256i *)e, _mm256_add_epi64(even0, even1));
    _mm256_storeu_si256((__m256i *)o, _mm256_add_epi64(odd0, odd1));
    s->even += e[0] + e[1] + e[2] + e[3];
    s->odd += o[0] + o[1] + o[2] + o[3];
    _mm_sfence();
}
#else
int32_t kvc_copy_streaming(void) {
    return 0;
}
#endif

uint64_t kvc_copy_sum(const void *src, uint64_t src_offset, void *dst, uint64_t dst_offset, uint64_t n,
                      uint64_t position) {
    const uint8_t *from = (const uint8_t *)src + src_offset;
    uint8_t *to = (uint8_t *)dst + dst_offset;
    sums s = {0, 0};
    uint64_t head = (8u - (position & 7u)) & 7u;
    if (head > n) {
        head = n;
    }
    copy_bytes(from, to, head, position, &s);
    from += head;
    to += head;
    n -= head;
    uint64_t words = n & ~(uint64_t)7u;
#ifdef KVC_X86
    if (words >= STREAM_MIN_BYTES && ((uintptr_t)to & 7u) == 0 && kvc_copy_streaming()) {
        uint64_t align = (32u - ((uintptr_t)to & 31u)) & 31u;
        copy_words(from, to, align, &s);
        uint64_t streamed = (words - align) & ~(uint64_t)31u;
        stream_words(from + align, to + align, streamed, &s);
        copy_words(from + align + streamed, to + align + streamed, words - align - streamed, &s);
    } else {
        copy_words(from, to, words, &s);
    }
#else
    copy_words(from, to, words, &s);
#endif
    copy_bytes(from + words, to + words, n - words, 0, &s);
    return ((s.odd & LOW_WORD) << 32) | (s.even & LOW_WORD);
}
