package dev.kvconnector.store.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The descriptor of a store file, as Agrona's {@code RingBufferDescriptor} is of a ring buffer: every offset and
 * encoding of the on-file format, as named constants, and where the variable regions lie, computed once from the
 * header's sizes. Nothing here touches a file; {@link ShmFile} writes and checks the header, and each part of the
 * store reads and writes its own region.
 *
 * <p>File layout (offsets in bytes, each region 64-byte aligned, the payload area 4096-byte aligned):
 * <pre>
 *   0               +------------------------------------------------------------------+
 *                   | header, HEADER_BYTES (4096)                                      |
 *                   |   0..255    immutable: MAGIC, VERSION, sizes and region offsets  |
 *                   |   256       LOCK word (its own cache line)                       |
 *                   |   320       INDEX_EPOCH seqlock word (its own cache line)        |
 *                   |   384..463  counters and cursors, changed under the lock         |
 *                   |   512..543  event ring: TAIL_INTENT, TAIL, LATEST (published    |
 *                   |             with release), EVENT_SEQ (changed under the lock)    |
 *   bitmapOffset    +------------------------------------------------------------------+
 *                   | allocation bitmap: 1 bit per payload block, 1 = in use;          |
 *                   | bits past the last block stay 1                                  |
 *   procOffset      +------------------------------------------------------------------+
 *                   | process table: PROC_SLOTS slots of PROC_STRIDE bytes, each       |
 *                   |   [owner token][lease 0] ... [lease LEASES_PER_PROC - 1]         |
 *                   | a lease: 0 unused, CLAIMED reserved, entry index + 1 leased      |
 *   indexOffset     +------------------------------------------------------------------+
 *                   | hash index: slotCount longs, each 0 (empty), TOMBSTONE, or       |
 *                   |   key hash tag (high 32 bits) | entry index + 1 (low 32 bits)     |
 *   entryOffset     +------------------------------------------------------------------+
 *                   | entry table: entryCount records of ENTRY_BYTES (352) bytes:      |
 *                   |   0 state word: generation &lt;&lt; 8 | FREE, WRITING, COMMITTED, RETIRED |
 *                   |   8 writer's token, 16 start ms, 24 payload offset, 32 blocks,    |
 *                   |   40 value length, 48 expiry ms, 56 commit sequence, 64 key hash, |
 *                   |   72 next free (int), 76 key length (int), 80 referenced (int),  |
 *                   |   96 key, MAX_KEY_BYTES UTF-8 bytes (256 reserved)               |
 *   ringOffset      +------------------------------------------------------------------+
 *                   | event ring: ringBytes (a power of two) of records, each          |
 *                   |   RECORD_ALIGNMENT-aligned: 0 length (int, header included),     |
 *                   |   4 type (int: STORED, REMOVED, EVICTED, EXPIRED or PADDING),    |
 *                   |   8 sequence, 16 value bytes, 24 key length (int), 32 key        |
 *   payloadOffset   +------------------------------------------------------------------+
 *                   | payload area: capacity bytes in blocks of blockSize bytes        |
 *   fileSize        +------------------------------------------------------------------+
 * </pre>
 * Every number read back from a file is checked against this layout before it is used as an offset.
 *
 * <p>{@link #VERSION} names this layout. It rises only when an offset, a size or an encoding above changes, and a
 * file of another version is refused at open, naming the file and both versions. Version 2 added the event ring
 * (its header words, its sizes in the immutable header, its region before the payload).
 *
 * <p>The event ring is a broadcast buffer in the style of Agrona's {@code BroadcastBufferDescriptor}: the position
 * of a record is a byte count since the file was created (never reset), its offset in the ring that count modulo
 * {@code ringBytes}. {@code EventRing} writes it, {@code EventReceiver} reads it.
 */
record ShmLayout(long capacity, long blockSize, long blockCount, long entryCount, long slotCount, long bitmapOffset,
                 long procOffset, long indexOffset, long entryOffset, long ringOffset, long ringBytes,
                 long payloadOffset, long fileSize) {

    /** "KVCSHM01" in ASCII, little-endian. */
    static final long MAGIC = 0x3130_4D48_5343_564BL;
    static final int VERSION = 2;
    static final long HEADER_BYTES = 4096;

    // Immutable header fields, written once by the creator before the file is published.
    static final long H_MAGIC = 0;
    static final long H_VERSION = 8;
    static final long H_HEADER_BYTES = 12;
    static final long H_FILE_SIZE = 16;
    static final long H_CAPACITY = 24;
    static final long H_BLOCK_SIZE = 32;
    static final long H_ENTRY_COUNT = 40;
    static final long H_SLOT_COUNT = 48;
    static final long H_PROC_SLOTS = 56;
    static final long H_LEASES_PER_PROC = 60;
    static final long H_CREATOR_UID = 64;
    static final long H_PID_NAMESPACE = 72;
    static final long H_CREATED_MILLIS = 80;
    static final long H_BITMAP_OFFSET = 96;
    static final long H_PROC_OFFSET = 104;
    static final long H_INDEX_OFFSET = 112;
    static final long H_ENTRY_OFFSET = 120;
    static final long H_PAYLOAD_OFFSET = 128;
    static final long H_RING_OFFSET = 136;
    static final long H_RING_BYTES = 144;
    /** The event ring's epoch: creation ms shifted left 12, salted, so a recreated file numbers afresh. */
    static final long H_EVENT_EPOCH = 152;

    // Mutable shared words. Apart from LOCK and INDEX_EPOCH they change only under the store lock.
    static final long H_LOCK = 256;
    static final long H_INDEX_EPOCH = 320;
    static final long H_CLOCK_HAND = 384;
    static final long H_FREE_HEAD = 392;
    static final long H_ENTRY_WATERMARK = 400;
    static final long H_USED_BLOCKS = 408;
    static final long H_LIVE_ENTRIES = 416;
    static final long H_RETIRED_ENTRIES = 424;
    static final long H_COMMIT_SEQ = 432;
    static final long H_BITMAP_HINT = 440;
    static final long H_USED_SLOTS = 448;
    static final long H_TOMBSTONES = 456;
    // The event ring's cursors, in bytes written since creation (see EventRing).
    static final long H_RING_TAIL_INTENT = 512;
    static final long H_RING_TAIL = 520;
    static final long H_RING_LATEST = 528;
    static final long H_EVENT_SEQ = 536;

    // Event record fields and types.
    static final long R_LENGTH = 0;
    static final long R_TYPE = 4;
    static final long R_SEQUENCE = 8;
    static final long R_BYTES = 16;
    static final long R_KEY_LENGTH = 24;
    static final long R_KEY = 32;
    static final int RECORD_ALIGNMENT = 8;
    static final int PADDING = -1;
    static final int EVENT_STORED = 1;
    static final int EVENT_REMOVED = 2;
    static final int EVENT_EVICTED = 3;
    static final int EVENT_EXPIRED = 4;

    // Entry states: the low byte of an entry's state word.
    static final int FREE = 0;
    static final int WRITING = 1;
    static final int COMMITTED = 2;
    static final int RETIRED = 3;

    /** An index slot whose entry was removed: probes go on past it. */
    static final long TOMBSTONE = -1L;
    /** A lease record taken by a reader that has not yet named an entry in it. */
    static final long CLAIMED = -2L;

    static final int PROC_SLOTS = 64;
    static final int LEASES_PER_PROC = 63;
    static final long PROC_STRIDE = 8L * (1 + LEASES_PER_PROC);

    /** Longest key, in UTF-8 bytes. */
    static final int MAX_KEY_BYTES = 250;
    /** The longest event record: its header and the longest key, aligned. */
    static final int MAX_RECORD = (int) ((R_KEY + MAX_KEY_BYTES + RECORD_ALIGNMENT - 1) & -RECORD_ALIGNMENT);

    // Entry record fields.
    static final long E_STATE = 0;
    static final long E_OWNER = 8;
    static final long E_STARTED_MILLIS = 16;
    static final long E_PAYLOAD_OFFSET = 24;
    static final long E_BLOCKS = 32;
    static final long E_VALUE_LENGTH = 40;
    static final long E_EXPIRES_MILLIS = 48;
    static final long E_COMMIT_SEQ = 56;
    static final long E_KEY_HASH = 64;
    static final long E_NEXT_FREE = 72;
    static final long E_KEY_LENGTH = 76;
    static final long E_REFERENCED = 80;
    static final long E_KEY = 96;
    static final long ENTRY_BYTES = E_KEY + 256;

    static final long MIN_BLOCK = 64;
    static final long MAX_BLOCK = 1L << 24;
    static final long MIN_ENTRIES = 16;
    static final long MAX_ENTRIES = 1L << 24;
    static final long MAX_CAPACITY = 1L << 46;
    static final long MIN_RING = 4096;
    static final long MAX_RING = 1L << 30;
    /** Default event ring: 1 MiB, about 5,000 events of 150-byte keys. */
    static final long DEFAULT_RING = 1L << 20;

    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    /** The layout for the given sizes with the default event ring; null when they are out of range. */
    static ShmLayout of(long capacity, long blockSize, long entryCount) {
        return of(capacity, blockSize, entryCount, DEFAULT_RING);
    }

    /**
     * Computes the layout for the given sizes; null when they are out of range (callers name the range).
     *
     * @param capacity payload bytes; rounded down to whole blocks
     * @param blockSize allocation unit in bytes, a power of two
     * @param entryCount most entries the store holds at once
     * @param ringBytes the event ring's size in bytes, a power of two from {@link #MIN_RING} to {@link #MAX_RING}
     */
    static ShmLayout of(long capacity, long blockSize, long entryCount, long ringBytes) {
        if (blockSize < MIN_BLOCK || blockSize > MAX_BLOCK || Long.bitCount(blockSize) != 1
                || capacity < blockSize || capacity > MAX_CAPACITY
                || entryCount < MIN_ENTRIES || entryCount > MAX_ENTRIES
                || ringBytes < MIN_RING || ringBytes > MAX_RING || Long.bitCount(ringBytes) != 1) {
            return null;
        }
        long blockCount = capacity / blockSize;
        long slotCount = Long.highestOneBit(entryCount * 2 - 1) << 1;
        long bitmapOffset = HEADER_BYTES;
        long bitmapBytes = align((blockCount + 63) / 64 * 8, 64);
        long procOffset = bitmapOffset + bitmapBytes;
        long indexOffset = procOffset + PROC_SLOTS * PROC_STRIDE;
        long entryOffset = align(indexOffset + slotCount * 8, 64);
        long ringOffset = align(entryOffset + entryCount * ENTRY_BYTES, 64);
        long payloadOffset = align(ringOffset + ringBytes, 4096);
        return new ShmLayout(blockCount * blockSize, blockSize, blockCount, entryCount, slotCount, bitmapOffset,
                procOffset, indexOffset, entryOffset, ringOffset, ringBytes, payloadOffset,
                payloadOffset + blockCount * blockSize);
    }

    /** A shared header word, read under the store lock. */
    static long word(MemorySegment map, long offset) {
        return (long) LONG.get(map, offset);
    }

    /** Writes a shared header word under the store lock; the lock's release publishes it. */
    static void setWord(MemorySegment map, long offset, long value) {
        LONG.setRelease(map, offset, value);
    }

    private static long align(long v, long to) {
        return (v + to - 1) & -to;
    }

    long entry(long e) {
        return entryOffset + e * ENTRY_BYTES;
    }

    long slot(long i) {
        return indexOffset + i * 8;
    }

    long proc(int p) {
        return procOffset + p * PROC_STRIDE;
    }

    long lease(int p, int l) {
        return procOffset + p * PROC_STRIDE + 8 + l * 8L;
    }
}
