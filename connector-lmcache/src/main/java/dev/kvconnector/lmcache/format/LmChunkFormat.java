package dev.kvconnector.lmcache.format;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;

/**
 * The layouts LMCache stores a chunk in, and the packing of per-layer K and V tensors of shape
 * {@code [T_layer, H, D]} (row-major, {@code T_layer >= startToken + T}) into them and back.
 *
 * <p>Packing copies bytes only; dtypes are the caller's (give {@code elementBytes} in the geometry). Where the
 * layout keeps a token's heads together the copy moves whole blocks; {@link #V0_HUGGINGFACE} puts heads before
 * tokens and moves one head row ({@code D} elements) at a time.
 */
public enum LmChunkFormat {
    /** 2024 fmt {@code vllm}: {@code [L, 2, T, H, D]}. */
    V0_VLLM(2, -1),
    /** 2024 fmt {@code huggingface}: {@code [L, 2, H, T, D]}. */
    V0_HUGGINGFACE(2, -1),
    /** v1 MemoryFormat {@code KV_2LTD} (1): {@code [2, L, T, H*D]}. */
    V1_KV_2LTD(2, 1),
    /** v1 MemoryFormat {@code KV_MLA_FMT} (6): {@code [1, L, T, D]}, one latent tensor per layer, H = 1. */
    V1_KV_MLA(1, 6);

    private final int tensorsPerLayer;
    private final int memoryFormat;

    LmChunkFormat(int tensorsPerLayer, int memoryFormat) {
        this.tensorsPerLayer = tensorsPerLayer;
        this.memoryFormat = memoryFormat;
    }

    /** Tensors per layer: 2 (K and V), or 1 for MLA. */
    public int tensorsPerLayer() {
        return tensorsPerLayer;
    }

    /** The v1 MemoryFormat number, or -1 for the 2024 layouts, which have none. */
    public int memoryFormat() {
        return memoryFormat;
    }

    /** The chunk's shape in elements, outermost first, as LMCache writes it. */
    public long[] shape(LmChunkGeometry g) {
        long l = g.layers();
        long t = g.tokens();
        long h = g.heads();
        long d = g.headSize();
        return switch (this) {
            case V0_VLLM -> new long[] {l, 2, t, h, d};
            case V0_HUGGINGFACE -> new long[] {l, 2, h, t, d};
            case V1_KV_2LTD -> new long[] {2, l, t, h * d};
            case V1_KV_MLA -> new long[] {1, l, t, d};
        };
    }

    /** The chunk's size in bytes. */
    public long chunkBytes(LmChunkGeometry g) {
        return tensorsPerLayer * g.layers() * g.tensorBytes();
    }

    /**
     * Whether each layer's K (or V, or latent) lies in the chunk as one contiguous {@code [T, H, D]} block, so that
     * a paged cache can gather into and scatter from the chunk directly. False only for {@link #V0_HUGGINGFACE},
     * which puts heads before tokens.
     */
    public boolean tokenMajor() {
        return this != V0_HUGGINGFACE;
    }

    /**
     * The byte offset in the chunk of the contiguous {@code [T, H, D]} block of one layer's tensor.
     *
     * @param tensor 0 for K (or the MLA latent), 1 for V
     * @throws KVException {@code UNSUPPORTED} for {@link #V0_HUGGINGFACE}, whose tensors are not contiguous by token
     */
    public long blockOffset(LmChunkGeometry g, int layer, int tensor) {
        return switch (this) {
            case V0_VLLM -> (2L * layer + tensor) * g.tensorBytes();
            case V1_KV_2LTD -> ((long) tensor * g.layers() + layer) * g.tensorBytes();
            case V1_KV_MLA -> layer * g.tensorBytes();
            case V0_HUGGINGFACE -> throw KVException.of(ErrorCode.UNSUPPORTED, "fmt huggingface keeps heads before "
                    + "tokens: a layer's tensor is not one block; use pack/unpack").build();
        };
    }

    /**
     * Packs tokens {@code [startToken, startToken + T)} of every layer's K and V into {@code chunk}.
     *
     * @param k          one K tensor per layer (for MLA, the latent tensor)
     * @param v          one V tensor per layer; ignored (may be null) for MLA
     * @param startToken the first token of the chunk within the layer tensors
     * @throws KVException {@code SHAPE_MISMATCH} naming the tensor and the byte counts when a segment is too small
     */
    public void pack(MemorySegment[] k, MemorySegment[] v, long startToken, LmChunkGeometry g, MemorySegment chunk) {
        move(true, k, v, startToken, g, chunk);
    }

    /** Unpacks {@code chunk} into tokens {@code [startToken, startToken + T)} of every layer's K and V. */
    public void unpack(MemorySegment chunk, LmChunkGeometry g, MemorySegment[] k, MemorySegment[] v,
                       long startToken) {
        move(false, k, v, startToken, g, chunk);
    }

    private void move(boolean toChunk, MemorySegment[] k, MemorySegment[] v, long start, LmChunkGeometry g,
                      MemorySegment chunk) {
        check(k, v, start, g, chunk);
        long row = g.tokenBytes();
        long block = g.tensorBytes();
        long tensorStart = start * row;
        for (int l = 0; l < g.layers(); l++) {
            for (int kv = 0; kv < tensorsPerLayer; kv++) {
                MemorySegment tensor = kv == 0 ? k[l] : v[l];
                if (this == V0_HUGGINGFACE) {
                    long headRow = (long) g.headSize() * g.elementBytes();
                    long base = (2L * l + kv) * block;
                    for (int h = 0; h < g.heads(); h++) {
                        for (int t = 0; t < g.tokens(); t++) {
                            copy(toChunk, chunk, base + ((long) h * g.tokens() + t) * headRow, tensor,
                                    tensorStart + t * row + h * headRow, headRow);
                        }
                    }
                } else {
                    copy(toChunk, chunk, blockOffset(g, l, kv), tensor, tensorStart, block);
                }
            }
        }
    }

    private static void copy(boolean toChunk, MemorySegment chunk, long chunkOffset, MemorySegment tensor,
                             long tensorOffset, long bytes) {
        if (toChunk) {
            MemorySegment.copy(tensor, tensorOffset, chunk, chunkOffset, bytes);
        } else {
            MemorySegment.copy(chunk, chunkOffset, tensor, tensorOffset, bytes);
        }
    }

    private void check(MemorySegment[] k, MemorySegment[] v, long start, LmChunkGeometry g, MemorySegment chunk) {
        if (this == V1_KV_MLA && g.heads() != 1) {
            throw mismatch("KV_MLA_FMT holds one latent per token: heads must be 1, not " + g.heads());
        }
        if (start < 0) {
            throw mismatch("start token " + start + " is negative");
        }
        if (chunk.byteSize() < chunkBytes(g)) {
            throw mismatch(this + " chunk of " + g + " needs " + chunkBytes(g) + " bytes; the segment has "
                    + chunk.byteSize());
        }
        long need = (start + g.tokens()) * g.tokenBytes();
        checkTensors("K", k, g.layers(), need, start, g);
        if (tensorsPerLayer == 2) {
            checkTensors("V", v, g.layers(), need, start, g);
        }
    }

    private static void checkTensors(String name, MemorySegment[] tensors, int layers, long need, long start,
                                     LmChunkGeometry g) {
        if (tensors == null || tensors.length < layers) {
            throw mismatch("need " + layers + " " + name + " tensors, got "
                    + (tensors == null ? "none" : tensors.length));
        }
        for (int l = 0; l < layers; l++) {
            if (tensors[l].byteSize() < need) {
                throw mismatch(name + " tensor of layer " + l + " has " + tensors[l].byteSize() + " bytes; tokens "
                        + start + ".." + (start + g.tokens()) + " of " + g.tokenBytes() + " bytes each need " + need);
            }
        }
    }

    private static KVException mismatch(String detail) {
        return KVException.of(ErrorCode.SHAPE_MISMATCH, detail).build();
    }
}
