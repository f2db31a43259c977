package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ShmLayoutTest {
    @Test
    void regionsFollowEachOtherAlignedAndWithoutOverlap() {
        ShmLayout l = ShmLayout.of(1 << 20, 4096, 1024);
        assertEquals(256, l.blockCount());
        assertEquals(2048, l.slotCount(), "at least twice the entries, a power of two");
        assertEquals(ShmLayout.HEADER_BYTES, l.bitmapOffset());
        assertTrue(l.procOffset() >= l.bitmapOffset() + l.blockCount() / 8);
        assertEquals(l.procOffset() + ShmLayout.PROC_SLOTS * ShmLayout.PROC_STRIDE, l.indexOffset());
        assertTrue(l.entryOffset() >= l.indexOffset() + l.slotCount() * 8);
        assertTrue(l.ringOffset() >= l.entryOffset() + l.entryCount() * ShmLayout.ENTRY_BYTES);
        assertEquals(ShmLayout.DEFAULT_RING, l.ringBytes());
        assertTrue(l.payloadOffset() >= l.ringOffset() + l.ringBytes());
        assertEquals(0, l.ringOffset() % 64);
        assertEquals(0, l.payloadOffset() % 4096, "the payload starts on a page");
        assertEquals(0, l.entryOffset() % 64);
        assertEquals(l.payloadOffset() + l.capacity(), l.fileSize());
        assertEquals(l.lease(0, ShmLayout.LEASES_PER_PROC - 1) + 8, l.proc(1), "a slot's leases end at the next slot");
        assertTrue(ShmLayout.E_KEY + ShmLayout.MAX_KEY_BYTES <= ShmLayout.ENTRY_BYTES);
    }

    @Test
    void capacityIsRoundedDownToWholeBlocks() {
        ShmLayout l = ShmLayout.of(10_000, 4096, 16);
        assertEquals(8192, l.capacity());
        assertEquals(2, l.blockCount());
    }

    @Test
    void sizesOutOfRangeGiveNoLayout() {
        assertNull(ShmLayout.of(1 << 20, 3000, 1024), "block not a power of two");
        assertNull(ShmLayout.of(1 << 20, 32, 1024), "block below 64 B");
        assertNull(ShmLayout.of(100, 4096, 1024), "capacity below one block");
        assertNull(ShmLayout.of(1 << 20, 4096, 15), "entries below 16");
        assertNull(ShmLayout.of(1 << 20, 4096, (1L << 24) + 1), "entries above 2^24");
        assertNull(ShmLayout.of((1L << 46) + 4096, 4096, 1024), "capacity above 2^46");
        assertNull(ShmLayout.of(1 << 20, 4096, 1024, 2048), "event ring below 4 KiB");
        assertNull(ShmLayout.of(1 << 20, 4096, 1024, 5000), "event ring not a power of two");
    }

    /**
     * The format of version 2, pinned: a change to any of these numbers changes the file format, and must come with
     * a new {@link ShmLayout#VERSION} (so that a file of the old layout is refused, not misread).
     */
    @Test
    void version2LayoutIsPinned() {
        assertEquals(2, ShmLayout.VERSION);
        assertEquals(0x3130_4D48_5343_564BL, ShmLayout.MAGIC);
        ShmLayout l = ShmLayout.of(1 << 20, 4096, 1024);
        assertEquals(4096, l.bitmapOffset());
        assertEquals(4160, l.procOffset());
        assertEquals(36928, l.indexOffset());
        assertEquals(53312, l.entryOffset());
        assertEquals(413760, l.ringOffset());
        assertEquals(1466368, l.payloadOffset());
        assertEquals(2514944, l.fileSize());
        assertEquals(288, ShmLayout.MAX_RECORD);
        assertEquals(352, ShmLayout.ENTRY_BYTES);
        assertEquals(512, ShmLayout.PROC_STRIDE);
        long[] header = {ShmLayout.H_LOCK, ShmLayout.H_INDEX_EPOCH, ShmLayout.H_CLOCK_HAND, ShmLayout.H_TOMBSTONES,
                ShmLayout.H_PAYLOAD_OFFSET, ShmLayout.E_REFERENCED, ShmLayout.E_KEY, ShmLayout.H_RING_OFFSET,
                ShmLayout.H_RING_BYTES, ShmLayout.H_EVENT_EPOCH, ShmLayout.H_RING_TAIL_INTENT, ShmLayout.H_RING_TAIL,
                ShmLayout.H_RING_LATEST, ShmLayout.H_EVENT_SEQ, ShmLayout.R_SEQUENCE, ShmLayout.R_KEY};
        long[] pinned = {256, 320, 384, 456, 128, 80, 96, 136, 144, 152, 512, 520, 528, 536, 8, 32};
        for (int i = 0; i < header.length; i++) {
            assertEquals(pinned[i], header[i], "offset " + i);
        }
        assertEquals(-1L, ShmLayout.TOMBSTONE);
        assertEquals(-2L, ShmLayout.CLAIMED);
        assertEquals(2, ShmLayout.COMMITTED);
    }
}
