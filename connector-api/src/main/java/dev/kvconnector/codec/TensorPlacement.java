package dev.kvconnector.codec;

/**
 * Where one layer's tensor (K, V or the MLA latent) of one chunk lies inside its object, in bytes: token {@code t}
 * (counted from the chunk's first token) and head {@code h} start at {@code offset + t * tokenStride + h * headStride}
 * and run for {@code headBytes}.
 *
 * @param offset byte offset of token 0, head 0 inside the object
 * @param tokens tokens of the chunk
 * @param heads KV heads per token
 * @param headBytes bytes of one head's row ({@code headSize * dtype width})
 * @param tokenStride bytes from one token to the next
 * @param headStride bytes from one head to the next
 */
public record TensorPlacement(long offset, int tokens, int heads, long headBytes, long tokenStride, long headStride) {
    /** A tensor stored as one contiguous {@code [tokens, heads, headSize]} block from {@code offset}. */
    public static TensorPlacement contiguous(long offset, int tokens, int heads, long headBytes) {
        return new TensorPlacement(offset, tokens, heads, headBytes, heads * headBytes, headBytes);
    }

    /** Whether the tensor is one contiguous token-major block, which a paged cache gathers into directly. */
    public boolean isContiguous() {
        return headStride == headBytes && tokenStride == heads * headBytes;
    }

    /** Bytes of the tensor's data ({@code tokens * heads * headBytes}). */
    public long bytes() {
        return tokens * heads * headBytes;
    }
}
