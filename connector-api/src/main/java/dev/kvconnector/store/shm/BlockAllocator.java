package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.H_BITMAP_HINT;
import static dev.kvconnector.store.shm.ShmLayout.H_USED_BLOCKS;
import static dev.kvconnector.store.shm.ShmLayout.setWord;
import static dev.kvconnector.store.shm.ShmLayout.word;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The payload area's blocks: a bitmap in the file (one bit per block, 1 = in use), searched next-fit from a hint,
 * and the count of blocks in use. Every method but {@link #usedBlocks()} runs under the store lock.
 */
final class BlockAllocator {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private final MemorySegment map;
    private final ShmLayout lay;

    BlockAllocator(MemorySegment map, ShmLayout lay) {
        this.map = map;
        this.lay = lay;
    }

    /** Blocks in use, read without the lock. */
    long usedBlocks() {
        return (long) LONG.getVolatile(map, H_USED_BLOCKS);
    }

    /** Takes a run of {@code n} free blocks, next fit; returns its first block, or -1 when no run is that long. */
    long allocate(long n) {
        if (n == 0) {
            return 0;
        }
        long hint = word(map, H_BITMAP_HINT);
        long start = hint >= 0 && hint < lay.blockCount() ? hint : 0;
        long found = findRun(start, n);
        if (found < 0 && start > 0) {
            found = findRun(0, n);
        }
        if (found >= 0) {
            setBits(found, n, true);
            setWord(map, H_BITMAP_HINT, found + n);
            setWord(map, H_USED_BLOCKS, word(map, H_USED_BLOCKS) + n);
        }
        return found;
    }

    /**
     * Frees {@code n} blocks from {@code first}. The next allocation searches from the lowest run freed since the
     * last one: reusing pages the file already has avoids a page fault (and a zeroed tmpfs page) per 4 KiB that
     * walking on through untouched space would cost. The lowest, not the latest: a consumer frees a whole request,
     * and the next request must land on the start of that space, not after its last object and on into fresh pages.
     */
    void free(long first, long n) {
        setBits(first, n, false);
        setWord(map, H_BITMAP_HINT, Math.min(word(map, H_BITMAP_HINT), first));
        setWord(map, H_USED_BLOCKS, word(map, H_USED_BLOCKS) - n);
    }

    /** Whether all {@code n} blocks from {@code first} are free. */
    boolean isFree(long first, long n) {
        for (long b = first; b < first + n; b++) {
            if ((bitmapWord(b) >>> (b & 63) & 1) != 0) {
                return false;
            }
        }
        return true;
    }

    /** Empties the bitmap, the hint and the count, as a file starts and a rebuild begins. */
    void reset() {
        map.asSlice(lay.bitmapOffset(), lay.procOffset() - lay.bitmapOffset()).fill((byte) 0);
        markTailBlocksUsed();
        setWord(map, H_BITMAP_HINT, 0);
        setWord(map, H_USED_BLOCKS, 0);
    }

    /** Marks {@code n} blocks from {@code first} in use and counts them, as a rebuild finds them taken. */
    void markUsed(long first, long n) {
        setBits(first, n, true);
        setWord(map, H_USED_BLOCKS, word(map, H_USED_BLOCKS) + n);
    }

    /** Bits past the last block are kept set, so a free run found in the bitmap never extends past the end. */
    private void markTailBlocksUsed() {
        int rem = (int) (lay.blockCount() & 63);
        if (rem != 0) {
            map.set(ValueLayout.JAVA_LONG, lay.bitmapOffset() + (lay.blockCount() >>> 6) * 8, -1L << rem);
        }
    }

    private long bitmapWord(long block) {
        return (long) LONG.get(map, lay.bitmapOffset() + (block >>> 6) * 8);
    }

    private long findRun(long from, long n) {
        long run = 0;
        long runStart = -1;
        long pos = from;
        long end = lay.blockCount();
        while (pos < end) {
            long word = bitmapWord(pos);
            int bit = (int) (pos & 63);
            if (bit == 0 && word == -1L) {
                run = 0;
                pos += 64;
            } else if (bit == 0 && word == 0) {
                if (run == 0) {
                    runStart = pos;
                }
                run += 64;
                pos += 64;
            } else {
                if ((word >>> bit & 1) == 0) {
                    if (run == 0) {
                        runStart = pos;
                    }
                    run++;
                } else {
                    run = 0;
                }
                pos++;
            }
            if (run >= n) {
                return runStart;
            }
        }
        return -1;
    }

    private void setBits(long from, long n, boolean used) {
        long pos = from;
        long end = from + n;
        while (pos < end) {
            long wo = lay.bitmapOffset() + (pos >>> 6) * 8;
            int bit = (int) (pos & 63);
            int count = (int) Math.min(64 - bit, end - pos);
            long mask = (count == 64 ? -1L : (1L << count) - 1) << bit;
            long word = (long) LONG.get(map, wo);
            LONG.set(map, wo, used ? word | mask : word & ~mask);
            pos += count;
        }
    }
}
