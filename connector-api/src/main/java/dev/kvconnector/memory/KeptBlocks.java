package dev.kvconnector.memory;

import java.util.ArrayDeque;
import java.util.List;
import java.util.function.ToLongFunction;
import org.agrona.collections.Long2ObjectHashMap;

/**
 * Freed native blocks kept for the next allocation of exactly their size, so that a store which replaces or
 * consumes values of the same few sizes (a layer, a chunk) writes into pages that are already mapped. On the
 * project's VM a write into fresh memory pays one page fault per 4 KiB page: a 32 MiB value took 8,200 faults and
 * 150-900 ms where a write into kept memory took 15-60 ms. glibc returns blocks of this size to the kernel when they
 * are freed, so malloc alone does not keep them.
 *
 * <p>Not thread-safe: the owning store calls it under its own lock, and decides whether a block may be kept (its
 * capacity counts {@link #bytes()}). Kept blocks are freed by the owner, outside its lock.
 *
 * <p>Allocation-free in steady state: sizes key an Agrona {@code Long2ObjectHashMap} (no boxing), and a size's
 * queue stays in the map when it empties, so that keeping and taking blocks of the same few sizes, as a store does
 * per layer, makes no object.
 *
 * @param <B> what the owner keeps per block: the block's segment, or an object holding it (and its slices) so that
 *     those are reused too
 */
public final class KeptBlocks<B> {
    /**
     * The smallest block worth keeping for its mapped pages: malloc reuses smaller freed blocks from its own heap. An
     * owner may keep smaller ones for the objects it keeps with them, as {@code memory:} keeps its entries.
     */
    public static final long MIN_BYTES = 64 * 1024;

    private final Long2ObjectHashMap<ArrayDeque<B>> bySize = new Long2ObjectHashMap<>();
    private final ToLongFunction<B> sizeOf;
    private long bytes;

    /** Keeps blocks whose size in bytes {@code sizeOf} tells. */
    public KeptBlocks(ToLongFunction<B> sizeOf) {
        this.sizeOf = sizeOf;
    }

    /** A kept block of exactly {@code size} bytes, no longer kept; or null. */
    public B take(long size) {
        ArrayDeque<B> q = bySize.get(size);
        B block = q == null ? null : q.pollFirst();
        if (block != null) {
            bytes -= size;
        }
        return block;
    }

    /** Keeps {@code block} for a later {@link #take} of its size. */
    public void keep(B block) {
        long size = sizeOf.applyAsLong(block);
        ArrayDeque<B> q = bySize.get(size);
        if (q == null) {
            q = new ArrayDeque<>();
            bySize.put(size, q);
        }
        q.addFirst(block);
        bytes += size;
    }

    /** Stops keeping one block and returns it, for the owner to free; null when none is kept. */
    public B dropOne() {
        for (ArrayDeque<B> q : bySize.values()) {
            B block = q.pollFirst();
            if (block != null) {
                bytes -= sizeOf.applyAsLong(block);
                return block;
            }
        }
        return null;
    }

    /** Stops keeping every block and adds them to {@code out}, for the owner to free. */
    public void drainTo(List<? super B> out) {
        bySize.values().forEach(out::addAll);
        bySize.clear();
        bytes = 0;
    }

    /** Bytes kept. */
    public long bytes() {
        return bytes;
    }
}
