// Paged-KV gather and scatter for kvconnector, compiled to PTX (build-ptx.sh) and loaded by
// dev.kvconnector.cuda.CudaPagedKernels with cuModuleLoadData.
//
// A layer holds one or two tensors (MLA: the latent; MHA: K and V), each a paged cache of
// [numBlocks, blockSize, kvHeads, headSize] elements, i.e. one row of token_bytes bytes per slot.
// gather copies a request's rows, slot by slot, into a contiguous [T, kvHeads, headSize] region per
// tensor; scatter copies back. The element type only sets token_bytes (fp32, fp16, bf16, fp8 e4m3/e5m2
// all move as bytes), so each entry copies in one vector width: 16 bytes (uint4), 4 bytes, or 1 byte
// when the host found nothing wider aligned.
//
// Launch: blockDim = (x: threads per token row, y: tokens per CTA), gridDim = (x: ceil(T / y),
// y: tensor count 1 or 2). Slots come from either
//   *_slots:  a slot mapping, int64 per token (vLLM's slot_mapping), or
//   *_blocks: a block table, int32 block id per block_size tokens.
// A negative slot or block id is padding and is skipped, as vLLM's reshape_and_cache does; a slot at or
// beyond cache_slots is skipped too so a bad index can never write outside the cache (the host checks
// host-side indices before launching and names the offending token).

#include <stdint.h>

namespace {

template <typename V>
__device__ __forceinline__ void copy_row(char* dst, const char* src, long long row_bytes) {
  const long long n = row_bytes / (long long)sizeof(V);
  const V* s = reinterpret_cast<const V*>(src);
  V* d = reinterpret_cast<V*>(dst);
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    d[i] = s[i];
  }
}

template <typename V, bool GATHER>
__device__ __forceinline__ void move_token(char* cache0, char* cache1, char* flat0, char* flat1,
                                           long long slot, long long token, long long token_bytes,
                                           long long cache_slots) {
  if (slot < 0 || slot >= cache_slots) {
    return;
  }
  char* cache = (blockIdx.y == 0 ? cache0 : cache1) + slot * token_bytes;
  char* flat = (blockIdx.y == 0 ? flat0 : flat1) + token * token_bytes;
  if (GATHER) {
    copy_row<V>(flat, cache, token_bytes);
  } else {
    copy_row<V>(cache, flat, token_bytes);
  }
}

template <typename V, bool GATHER>
__device__ __forceinline__ void by_slots(char* cache0, char* cache1, char* flat0, char* flat1,
                                         const void* index, int tokens, long long token_bytes,
                                         long long cache_slots) {
  const long long token = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  if (token >= tokens) {
    return;
  }
  const long long slot = static_cast<const long long*>(index)[token];
  move_token<V, GATHER>(cache0, cache1, flat0, flat1, slot, token, token_bytes, cache_slots);
}

template <typename V, bool GATHER>
__device__ __forceinline__ void by_blocks(char* cache0, char* cache1, char* flat0, char* flat1,
                                          const void* index, int block_size, int tokens,
                                          long long token_bytes, long long cache_slots) {
  const long long token = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  if (token >= tokens) {
    return;
  }
  const int block = static_cast<const int*>(index)[token / block_size];
  const long long slot = block < 0 ? -1 : (long long)block * block_size + token % block_size;
  move_token<V, GATHER>(cache0, cache1, flat0, flat1, slot, token, token_bytes, cache_slots);
}

}  // namespace

// Every entry takes the same parameters, so the host packs one argument list for all of them:
// (cache0, cache1, flat0, flat1, index, block_size, tokens, token_bytes, cache_slots).
#define KVC_ENTRIES(SUFFIX, V)                                                                      \
  extern "C" __global__ void kvc_gather_slots_##SUFFIX(char* c0, char* c1, char* f0, char* f1,      \
      const void* index, int block_size, int tokens, long long token_bytes, long long cache_slots) { \
    by_slots<V, true>(c0, c1, f0, f1, index, tokens, token_bytes, cache_slots);                     \
  }                                                                                                 \
  extern "C" __global__ void kvc_scatter_slots_##SUFFIX(char* c0, char* c1, char* f0, char* f1,     \
      const void* index, int block_size, int tokens, long long token_bytes, long long cache_slots) { \
    by_slots<V, false>(c0, c1, f0, f1, index, tokens, token_bytes, cache_slots);                    \
  }                                                                                                 \
  extern "C" __global__ void kvc_gather_blocks_##SUFFIX(char* c0, char* c1, char* f0, char* f1,     \
      const void* index, int block_size, int tokens, long long token_bytes, long long cache_slots) { \
    by_blocks<V, true>(c0, c1, f0, f1, index, block_size, tokens, token_bytes, cache_slots);        \
  }                                                                                                 \
  extern "C" __global__ void kvc_scatter_blocks_##SUFFIX(char* c0, char* c1, char* f0, char* f1,    \
      const void* index, int block_size, int tokens, long long token_bytes, long long cache_slots) { \
    by_blocks<V, false>(c0, c1, f0, f1, index, block_size, tokens, token_bytes, cache_slots);       \
  }

KVC_ENTRIES(v16, uint4)
KVC_ENTRIES(v4, unsigned int)
KVC_ENTRIES(v1, unsigned char)
