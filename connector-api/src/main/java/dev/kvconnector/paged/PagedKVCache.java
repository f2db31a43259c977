package dev.kvconnector.paged;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.ChecksummedCopy;
import dev.kvconnector.memory.WordSum;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A view of a paged KV cache in vLLM's flash layout: for every layer and every tensor of the layer (K and V for
 * MHA, the latent for MLA) one segment of {@code [numBlocks, blockSize, kvHeads, headSize]} elements.
 *
 * <p>{@link #gather} copies a request's tokens from their blocks into a contiguous {@code [T, kvHeads, headSize]}
 * region and {@link #scatter} copies back. Consecutive slots are copied as one run, so a block-aligned request
 * moves in {@code blockSize}-token copies. Every slot is bounds-checked against the cache.
 *
 * <p>The forms that take a {@link WordSum} fuse the integrity check into the copy: each run is copied in chunks of
 * at most {@link ChecksummedCopy#CHUNK_BYTES} and each chunk is added to the sum while it is still in cache, in
 * token order, so that after gathering every tensor of a layer into a payload, in payload order, the sum is the
 * payload's checksum: no second pass, and no allocation.
 */
public final class PagedKVCache implements AutoCloseable {
    private static final AtomicLong LIVE_OWNED = new AtomicLong();
    private final KVLayout layout;
    private final int numBlocks;
    private final MemorySegment[][] tensors;
    private final long tokenBytes;
    private final long capacitySlots;
    private final Arena owned;

    private PagedKVCache(KVLayout layout, int numBlocks, MemorySegment[][] tensors, Arena owned) {
        this.layout = layout;
        this.numBlocks = numBlocks;
        this.tensors = tensors;
        this.tokenBytes = layout.bytesPerTokenPerTensor();
        this.capacitySlots = (long) numBlocks * layout.blockSize();
        this.owned = owned;
    }

    /** Allocates a zeroed cache of {@code numBlocks} blocks per tensor in an arena the cache owns and frees on close. */
    public static PagedKVCache allocate(KVLayout layout, int numBlocks) {
        if (numBlocks <= 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a paged cache needs at least one block, not " + numBlocks).build();
        }
        Arena arena = Arena.ofShared();
        long bytes = layout.blockBytes() * numBlocks;
        MemorySegment[][] t = new MemorySegment[layout.numLayers()][layout.tensorsPerLayer()];
        for (MemorySegment[] layer : t) {
            for (int j = 0; j < layer.length; j++) {
                layer[j] = arena.allocate(bytes, 64);
            }
        }
        LIVE_OWNED.incrementAndGet();
        return new PagedKVCache(layout, numBlocks, t, arena);
    }

    /**
     * Wraps an engine's own cache segments, {@code perLayer[layer][tensor]}, each exactly
     * {@code numBlocks * layout.blockBytes()} bytes. The caller keeps ownership.
     */
    public static PagedKVCache wrap(KVLayout layout, int numBlocks, MemorySegment[][] perLayer) {
        long bytes = layout.blockBytes() * numBlocks;
        if (perLayer.length != layout.numLayers()) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, perLayer.length + " layers given, layout has "
                    + layout.numLayers()).build();
        }
        MemorySegment[][] copy = new MemorySegment[perLayer.length][];
        for (int l = 0; l < perLayer.length; l++) {
            if (perLayer[l].length != layout.tensorsPerLayer()) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, "layer " + l + " has " + perLayer[l].length
                        + " tensors, layout needs " + layout.tensorsPerLayer()).build();
            }
            for (MemorySegment s : perLayer[l]) {
                if (s.byteSize() != bytes) {
                    throw KVException.of(ErrorCode.SHAPE_MISMATCH, "layer " + l + " segment holds " + s.byteSize()
                            + " bytes, expected numBlocks=" + numBlocks + " x blockBytes=" + layout.blockBytes()
                            + " = " + bytes).build();
                }
            }
            copy[l] = perLayer[l].clone();
        }
        return new PagedKVCache(layout, numBlocks, copy, null);
    }

    /** The layout. */
    public KVLayout layout() {
        return layout;
    }

    /** Blocks per tensor. */
    public int numBlocks() {
        return numBlocks;
    }

    /** The segment of one layer's tensor (0 = K or latent, 1 = V). */
    public MemorySegment tensor(int layer, int tensor) {
        return tensors[layer][tensor];
    }

    /**
     * Copies tokens {@code [from, to)} of a request from one tensor of one layer into {@code dst} at
     * {@code dstOffset} (bytes), contiguous as {@code [to - from, kvHeads, headSize]}.
     */
    public void gather(int layer, int tensor, TokenSlots slots, int from, int to, MemorySegment dst, long dstOffset) {
        copy(layer, tensor, slots, from, to, dst, dstOffset, true);
    }

    /** Copies contiguous {@code [to - from, kvHeads, headSize]} data from {@code src} at {@code srcOffset} into the slots. */
    public void scatter(MemorySegment src, long srcOffset, int layer, int tensor, TokenSlots slots, int from, int to) {
        copy(layer, tensor, slots, from, to, src, srcOffset, false);
    }

    /**
     * {@link #gather(int, int, TokenSlots, int, int, MemorySegment, long)} that also adds the gathered bytes
     * to {@code sum}, in the order they land in {@code dst}. The caller resets the sum once per payload and gathers
     * the payload's tensors in payload order.
     */
    public void gather(int layer, int tensor, TokenSlots slots, int from, int to, MemorySegment dst, long dstOffset,
                       WordSum sum) {
        copy(layer, tensor, slots, from, to, dst, dstOffset, true, sum);
    }

    /**
     * {@link #scatter(MemorySegment, long, int, int, TokenSlots, int, int)} that also adds the scattered bytes
     * to {@code sum}, in their order in {@code src}. The slots already hold the bytes when the caller compares the
     * checksum, so on a mismatch it must treat the tokens as not loaded (recompute them).
     */
    public void scatter(MemorySegment src, long srcOffset, int layer, int tensor, TokenSlots slots, int from, int to,
                        WordSum sum) {
        copy(layer, tensor, slots, from, to, src, srcOffset, false, sum);
    }

    private void copy(int layer, int tensor, TokenSlots slots, int from, int to, MemorySegment flat, long flatOffset,
                      boolean gather) {
        copy(layer, tensor, slots, from, to, flat, flatOffset, gather, null);
    }

    private void copy(int layer, int tensor, TokenSlots slots, int from, int to, MemorySegment flat, long flatOffset,
                      boolean gather, WordSum sum) {
        if (from < 0 || to < from || to > slots.tokens()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "token range [" + from + ", " + to + ") outside the request's "
                    + slots.tokens() + " tokens").build();
        }
        long need = (to - from) * tokenBytes;
        if (flatOffset < 0 || flatOffset > flat.byteSize() - need) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "contiguous segment of " + flat.byteSize()
                    + " bytes cannot hold " + (to - from) + " tokens x " + tokenBytes + " bytes at offset " + flatOffset)
                    .build();
        }
        MemorySegment paged = tensors[layer][tensor];
        int t = from;
        while (t < to) {
            long first = checkedSlot(slots, t);
            int run = slots.run(t, to);
            checkedSlot(slots, t + run - 1);
            long pagedOff = first * tokenBytes;
            long flatOff = flatOffset + (long) (t - from) * tokenBytes;
            long bytes = run * tokenBytes;
            if (sum != null && gather) {
                ChecksummedCopy.copy(paged, pagedOff, flat, flatOff, bytes, sum);
            } else if (sum != null) {
                ChecksummedCopy.copy(flat, flatOff, paged, pagedOff, bytes, sum);
            } else if (gather) {
                MemorySegment.copy(paged, pagedOff, flat, flatOff, bytes);
            } else {
                MemorySegment.copy(flat, flatOff, paged, pagedOff, bytes);
            }
            t += run;
        }
    }

    private long checkedSlot(TokenSlots slots, int token) {
        long s = slots.slot(token);
        if (s < 0 || s >= capacitySlots) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "token " + token + " maps to slot " + s
                    + ", outside the cache's " + capacitySlots + " slots (numBlocks=" + numBlocks + " x blockSize="
                    + layout.blockSize() + ")").build();
        }
        return s;
    }

    /** Frees the memory when this cache allocated it; a wrapped cache leaves the caller's segments alone. */
    @Override
    public void close() {
        if (owned != null && owned.scope().isAlive()) {
            owned.close();
            LIVE_OWNED.decrementAndGet();
        }
    }

    /** Caches allocated by {@link #allocate} and not yet closed, across the process. */
    public static long liveAllocated() {
        return LIVE_OWNED.get();
    }
}
