package dev.kvconnector.demo;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * Hands out blocks of the paged KV cache from a free list (a stack, so recently freed blocks, still warm in cache,
 * are reused first). Thread-safe.
 */
public final class BlockAllocator {
    private final int[] free;
    private final int capacity;
    private int top;

    /** An allocator over block ids {@code 0..numBlocks-1}, all free. */
    public BlockAllocator(int numBlocks) {
        if (numBlocks < 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "an allocator needs at least one block, not " + numBlocks)
                    .build();
        }
        this.capacity = numBlocks;
        this.free = new int[numBlocks];
        for (int i = 0; i < numBlocks; i++) {
            free[i] = numBlocks - 1 - i;
        }
        this.top = numBlocks;
    }

    /**
     * Takes {@code n} blocks, all or none.
     *
     * @throws KVException {@code BUSY} when fewer than {@code n} blocks are free
     */
    public synchronized int[] allocate(int n) {
        if (n < 0 || n > top) {
            throw KVException.of(ErrorCode.BUSY, "need " + n + " KV blocks, " + top + " of " + capacity + " are free")
                    .operation("allocate")
                    .hint("wait for running requests to finish, or give the engine more blocks (--kv-blocks)").build();
        }
        int[] blocks = new int[n];
        for (int i = 0; i < n; i++) {
            blocks[i] = free[--top];
        }
        return blocks;
    }

    /** Returns blocks from {@link #allocate}; returning a block twice or one never handed out is a usage error. */
    public synchronized void free(int[] blocks) {
        if (top + blocks.length > capacity) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "freeing " + blocks.length + " blocks with " + top
                    + " of " + capacity + " already free: a double free").operation("free").build();
        }
        for (int b : blocks) {
            if (b < 0 || b >= capacity) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "block " + b + " is outside 0.." + (capacity - 1))
                        .operation("free").build();
            }
        }
        for (int b : blocks) {
            free[top++] = b;
        }
    }

    /** Blocks free now. */
    public synchronized int freeBlocks() {
        return top;
    }

    /** All blocks. */
    public int capacity() {
        return capacity;
    }
}
