package dev.kvconnector.store.shm;

import java.lang.foreign.MemorySegment;

/**
 * Slices of the mapping that claims or views hand out, kept for reuse. A {@link MemorySegment} is immutable, so every
 * slice at a new offset and length is a new object (40 bytes), and the claim or view that hands it out cannot reuse
 * its last one: a connector's claims and views land on other blocks each layer. But the blocks repeat: a freed run is
 * where the next allocation starts ({@link BlockAllocator#free}), so request after request claims, and then views,
 * the same runs. This cache finds the slice made for a run before, and a steady stream of claims or views allocates
 * nothing.
 *
 * <p>A set-associative table of {@link #WAYS} ways, indexed by a hash of the offset, each set kept in
 * most-recently-used order; a miss slices the mapping and evicts its set's least recently used slice. It takes no
 * lock: threads may race on a set, which costs at worst a slice made twice or dropped, never a wrong one, since each
 * slot holds a whole segment (whose fields are final, so it is safely published) and every hit is checked against
 * the offset and length asked for.
 */
final class SliceCache {
    /** Ways per set. */
    static final int WAYS = 2;
    /** Most sets a cache has, so at most 8,192 slices (about 360 KiB with their segments) per cache. */
    static final int MAX_SETS = 4096;

    private final MemorySegment base;
    private final long baseAddress;
    private final MemorySegment[] slots;
    private final int setShift;

    /**
     * @param base the mapping (read-write for claims, read-only for views), which every slice is cut from
     * @param entryCount the store's entry count: more distinct slices than entries are never live at once, so the
     *     cache has the power of two at or above it in sets, at most {@link #MAX_SETS}
     */
    SliceCache(MemorySegment base, long entryCount) {
        this.base = base;
        this.baseAddress = base.address();
        int sets = (int) Math.min(MAX_SETS, Long.highestOneBit(Math.max(1, entryCount - 1)) << 1);
        this.slots = new MemorySegment[sets * WAYS];
        this.setShift = 64 - Integer.numberOfTrailingZeros(sets);
    }

    /** The slice of {@code length} bytes at {@code offset} in the mapping: a cached one, or a new one then cached. */
    MemorySegment slice(long offset, long length) {
        int first = (int) ((offset * 0x9E37_79B9_7F4A_7C15L) >>> setShift) * WAYS;
        MemorySegment hit = null;
        int way = 0;
        for (; way < WAYS; way++) {
            MemorySegment s = slots[first + way];
            if (s != null && s.address() == baseAddress + offset && s.byteSize() == length) {
                hit = s;
                break;
            }
        }
        if (hit == null) {
            hit = base.asSlice(offset, length);
            way = WAYS - 1;
        }
        for (int w = way; w > 0; w--) {
            slots[first + w] = slots[first + w - 1];
        }
        slots[first] = hit;
        return hit;
    }
}
