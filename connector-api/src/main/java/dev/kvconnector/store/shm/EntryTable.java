package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The entry table: fixed records of {@link ShmLayout#ENTRY_BYTES} bytes, one per object, with a state word
 * (generation and FREE, WRITING, COMMITTED or RETIRED), the writer's token, the payload's block range and length,
 * the expiry and the key; the free list threaded through free records; and the watermark below which records have
 * been handed out. Writes run under the store lock; readers take the state word with acquire.
 */
final class EntryTable {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    /** {@link #pop()}'s answer when every record is in use. */
    static final int NONE = -1;
    /** {@link #pop()}'s answer when the free list's head names no record: the caller repairs the file. */
    static final int CORRUPT_LIST = -2;

    private final MemorySegment map;
    private final ShmLayout lay;

    EntryTable(MemorySegment map, ShmLayout lay) {
        this.map = map;
        this.lay = lay;
    }

    int state(int e) {
        return (int) (stateWord(e) & 0xFF);
    }

    /** The state word: generation &lt;&lt; 8 | state. Another word than at the claim means a repair reclaimed it. */
    long stateWord(int e) {
        return (long) LONG.get(map, lay.entry(e) + E_STATE);
    }

    /** The state word, read with acquire: what a lock-free reader sees before it reads the record. */
    long stateWordAcquire(int e) {
        return (long) LONG.getAcquire(map, lay.entry(e) + E_STATE);
    }

    /** Whether the entry is RETIRED, read volatile: the last reader out's half of the Dekker in {@link #setState}. */
    boolean isRetiredVolatile(int e) {
        return (((long) LONG.getVolatile(map, lay.entry(e) + E_STATE)) & 0xFF) == RETIRED;
    }

    /** Sets the state; WRITING starts a new generation. */
    void setState(int e, int state) {
        long eo = lay.entry(e);
        long w = (long) LONG.get(map, eo + E_STATE);
        long gen = state == WRITING ? (w >>> 8) + 1 : w >>> 8;
        if (state == RETIRED) {
            // Dekker with the last reader out: it clears its lease and then reads the state, we do the reverse.
            LONG.setVolatile(map, eo + E_STATE, gen << 8 | state);
        } else {
            LONG.setRelease(map, eo + E_STATE, gen << 8 | state);
        }
    }

    /**
     * Fills a record taken from the free list for a value of {@code len} bytes in {@code blocks} blocks from
     * {@code firstBlock}, written by this process from {@code now} (epoch ms), and marks it WRITING.
     */
    void begin(int e, KeyScratch k, long firstBlock, long blocks, long len, long now) {
        long eo = lay.entry(e);
        map.set(ValueLayout.JAVA_LONG, eo + E_OWNER, ProcessIdentity.SELF);
        map.set(ValueLayout.JAVA_LONG, eo + E_STARTED_MILLIS, now);
        map.set(ValueLayout.JAVA_LONG, eo + E_PAYLOAD_OFFSET, firstBlock * lay.blockSize());
        map.set(ValueLayout.JAVA_LONG, eo + E_BLOCKS, blocks);
        map.set(ValueLayout.JAVA_LONG, eo + E_VALUE_LENGTH, len);
        map.set(ValueLayout.JAVA_LONG, eo + E_EXPIRES_MILLIS, 0L);
        map.set(ValueLayout.JAVA_LONG, eo + E_KEY_HASH, k.hash);
        map.set(ValueLayout.JAVA_INT, eo + E_KEY_LENGTH, k.length);
        map.set(ValueLayout.JAVA_INT, eo + E_REFERENCED, 0);
        MemorySegment.copy(k.bytes, 0, map, eo + E_KEY, k.length);
        setState(e, WRITING);
    }

    /** Marks a WRITING record COMMITTED with its expiry (epoch ms, 0 for never) and commit sequence number. */
    void commit(int e, long expiresMillis, long seq) {
        long eo = lay.entry(e);
        map.set(ValueLayout.JAVA_LONG, eo + E_EXPIRES_MILLIS, expiresMillis);
        map.set(ValueLayout.JAVA_LONG, eo + E_COMMIT_SEQ, seq);
        setState(e, COMMITTED);
    }

    boolean expired(int e, long now) {
        long exp = map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_EXPIRES_MILLIS);
        return exp != 0 && now >= exp;
    }

    long owner(int e) {
        return map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_OWNER);
    }

    long startedMillis(int e) {
        return map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_STARTED_MILLIS);
    }

    /** Payload offset in bytes from the start of the payload area, as recorded (unchecked). */
    long payloadOffset(int e) {
        return map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_PAYLOAD_OFFSET);
    }

    long blocks(int e) {
        return map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_BLOCKS);
    }

    long valueLength(int e) {
        return map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_VALUE_LENGTH);
    }

    long keyHash(int e) {
        return map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_KEY_HASH);
    }

    int keyLength(int e) {
        return map.get(ValueLayout.JAVA_INT, lay.entry(e) + E_KEY_LENGTH);
    }

    long commitSeq(int e) {
        return map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_COMMIT_SEQ);
    }

    /** Whether the record's payload numbers lie inside the payload area. */
    boolean payloadInBounds(int e) {
        return payloadInBounds(payloadOffset(e), blocks(e), valueLength(e));
    }

    boolean payloadInBounds(long off, long blocks, long len) {
        return off >= 0 && blocks >= 0 && len >= 0 && off % lay.blockSize() == 0 && blocks <= lay.blockCount()
                && off <= lay.capacity() - blocks * lay.blockSize() && len <= blocks * lay.blockSize();
    }

    /** Drops the record's blocks from it, as it is freed. */
    void clearBlocks(int e) {
        map.set(ValueLayout.JAVA_LONG, lay.entry(e) + E_BLOCKS, 0L);
    }

    boolean keyMatches(int e, KeyScratch k) {
        long eo = lay.entry(e);
        int len = (int) INT.get(map, eo + E_KEY_LENGTH);
        return len == k.length && (long) LONG.get(map, eo + E_KEY_HASH) == k.hash
                && MemorySegment.mismatch(map, eo + E_KEY, eo + E_KEY + len, k.bytes, 0, len) == -1;
    }

    /** Whether records {@code a} and {@code b} hold the same key. */
    boolean sameKey(int a, int b) {
        long ao = lay.entry(a);
        long bo = lay.entry(b);
        int len = keyLength(a);
        return keyHash(a) == keyHash(b) && keyLength(b) == len
                && MemorySegment.mismatch(map, ao + E_KEY, ao + E_KEY + len, map, bo + E_KEY, bo + E_KEY + len) == -1;
    }

    /** Notes a read, for CLOCK's second chance; written only when clear, so hot entries' lines stay shared. */
    void markReferenced(int e) {
        long eo = lay.entry(e);
        if ((int) INT.get(map, eo + E_REFERENCED) == 0) {
            INT.set(map, eo + E_REFERENCED, 1);
        }
    }

    /** Clears the read mark; returns whether it was set. */
    boolean clearReferenced(int e) {
        long eo = lay.entry(e);
        if (map.get(ValueLayout.JAVA_INT, eo + E_REFERENCED) == 0) {
            return false;
        }
        map.set(ValueLayout.JAVA_INT, eo + E_REFERENCED, 0);
        return true;
    }

    /** Records below this index have been handed out at least once; clamped, as it is read from the file. */
    int watermark() {
        return (int) Math.clamp(word(map, H_ENTRY_WATERMARK), 0, lay.entryCount());
    }

    /** Takes a free record: the free list's head, else the next never used; {@link #NONE} or {@link #CORRUPT_LIST}. */
    int pop() {
        long head = word(map, H_FREE_HEAD);
        if (head != 0) {
            int e = (int) (head - 1);
            if (e < 0 || e >= lay.entryCount()) {
                return CORRUPT_LIST;
            }
            setWord(map, H_FREE_HEAD, map.get(ValueLayout.JAVA_INT, lay.entry(e) + E_NEXT_FREE));
            return e;
        }
        int mark = watermark();
        if (mark < lay.entryCount()) {
            setWord(map, H_ENTRY_WATERMARK, mark + 1L);
            return mark;
        }
        return NONE;
    }

    void push(int e) {
        map.set(ValueLayout.JAVA_INT, lay.entry(e) + E_NEXT_FREE, (int) word(map, H_FREE_HEAD));
        setWord(map, H_FREE_HEAD, e + 1L);
    }

    /**
     * Empties the free list for a rebuild, which pushes every record it drops; returns the watermark to rebuild
     * below (the whole table when the stored one is out of range).
     */
    int resetFreeList() {
        long stored = word(map, H_ENTRY_WATERMARK);
        int mark = stored < 0 || stored > lay.entryCount() ? (int) lay.entryCount() : (int) stored;
        setWord(map, H_ENTRY_WATERMARK, mark);
        setWord(map, H_FREE_HEAD, 0);
        return mark;
    }

    /** Entries removed or replaced whose blocks readers still hold. */
    long retired() {
        return (long) LONG.getVolatile(map, H_RETIRED_ENTRIES);
    }

    void addRetired(long delta) {
        setWord(map, H_RETIRED_ENTRIES, word(map, H_RETIRED_ENTRIES) + delta);
    }

    void setRetired(long n) {
        setWord(map, H_RETIRED_ENTRIES, n);
    }

    /** The next commit sequence number, counted in the header. */
    long nextCommitSeq() {
        long seq = word(map, H_COMMIT_SEQ) + 1;
        setWord(map, H_COMMIT_SEQ, seq);
        return seq;
    }
}
