package dev.kvconnector.cuda;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * The launch of one paged-KV gather or scatter ({@code native/cuda/paged_kv.cu}), computed on the host without a
 * GPU: which kernel entry, and the grid and block shapes.
 *
 * <p>Each token row ({@code tokenBytes} bytes of one tensor) is copied by {@code blockX} threads moving
 * {@code vectorBytes} per step: 16 bytes (one {@code uint4}) when the row size and every base address are 16-byte
 * aligned, else 4, else 1. A CTA holds {@code blockY} tokens so that it has about {@link #TARGET_THREADS} threads;
 * {@code gridX} CTAs cover the tokens and {@code gridY} is the tensor count (1 for MLA, 2 for K and V).
 *
 * @param entry the kernel entry in the PTX, for example {@code kvc_gather_slots_v16}
 * @param vectorBytes bytes each thread moves per load and store: 16, 4 or 1
 * @param blockX threads per token row, a multiple of 32 between 32 and {@link #TARGET_THREADS}
 * @param blockY tokens per CTA
 * @param gridX CTAs along the tokens
 * @param gridY tensors per layer
 */
public record PagedKernelGeometry(String entry, int vectorBytes, int blockX, int blockY, int gridX, int gridY) {
    /** Threads per CTA the geometry aims for: enough to hide latency, few enough for many CTAs per SM. */
    public static final int TARGET_THREADS = 256;
    /** The largest grid x dimension the driver accepts. */
    static final long MAX_GRID_X = Integer.MAX_VALUE;

    /** Which way the copy goes. */
    public enum Direction {
        /** Paged cache to contiguous {@code [T, heads, headSize]}. */
        GATHER("gather"),
        /** Contiguous {@code [T, heads, headSize]} to the paged cache. */
        SCATTER("scatter");

        private final String word;

        Direction(String word) {
            this.word = word;
        }
    }

    /** How the kernel finds a token's slot. */
    public enum Index {
        /** A slot mapping: one {@code int64} slot per token, as vLLM's {@code slot_mapping}. */
        SLOTS("slots"),
        /** A block table: one {@code int32} block id per {@code blockSize} tokens. */
        BLOCKS("blocks");

        private final String word;

        Index(String word) {
            this.word = word;
        }
    }

    /** Whether this launch does no work (zero tokens): the caller skips it. */
    public boolean empty() {
        return gridX == 0;
    }

    /** Threads per CTA. */
    public int threadsPerBlock() {
        return blockX * blockY;
    }

    /**
     * Plans a launch.
     *
     * @param direction gather or scatter
     * @param index slot mapping or block table
     * @param tokens tokens to move, at least 0
     * @param tokenBytes bytes of one token row of one tensor ({@code kvHeads * headSize * dtype width}), above 0
     * @param tensors tensors per layer, 1 or 2
     * @param addresses every cache and contiguous base address the kernel will touch; their alignment limits the
     *     vector width
     */
    public static PagedKernelGeometry plan(Direction direction, Index index, int tokens, long tokenBytes, int tensors,
            long... addresses) {
        if (tokens < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "tokens=" + tokens + " is negative").build();
        }
        if (tokenBytes <= 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "tokenBytes=" + tokenBytes + " must be above 0").build();
        }
        if (tensors != 1 && tensors != 2) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "tensors=" + tensors
                    + ": a layer holds 1 tensor (MLA latent) or 2 (K and V)").build();
        }
        long alignmentBits = tokenBytes;
        for (long address : addresses) {
            alignmentBits |= address;
        }
        int vector = (alignmentBits & 15) == 0 ? 16 : (alignmentBits & 3) == 0 ? 4 : 1;
        long vectorsPerRow = tokenBytes / vector;
        int blockX = (int) Math.min(TARGET_THREADS, Math.max(32, (vectorsPerRow + 31) / 32 * 32));
        int blockY = Math.max(1, Math.min(TARGET_THREADS / blockX, tokens));
        long gridX = (tokens + (long) blockY - 1) / blockY;
        if (gridX > MAX_GRID_X) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "tokens=" + tokens + " need gridX=" + gridX
                    + " CTAs, above the driver's limit " + MAX_GRID_X).build();
        }
        String entry = "kvc_" + direction.word + "_" + index.word + "_v" + vector;
        return new PagedKernelGeometry(entry, vector, blockX, blockY, (int) gridX, tensors);
    }
}
