package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The writing side of the event ring in the store file: a broadcast transmitter in the style of Agrona's
 * {@code BroadcastTransmitter}. It never waits for a reader: it overwrites the oldest records, and a reader that
 * falls a whole ring behind finds out ({@link EventReceiver}). Each record tells that an entry was stored, removed,
 * evicted or expired, with the key, the value's size and a sequence number from the file's counter.
 *
 * <p>Writers of several processes take turns under the store lock, which every caller holds, so one record is
 * written at a time, as Agrona's single-producer transmitter needs. Agrona's own classes are not used: they need
 * raw addresses of the mapping (see the package comment on Agrona), and a writer here may be killed in the middle
 * of a record, which the protocol below survives:
 * <ol>
 *   <li>the sequence counter is advanced first, so a record that never lands leaves a gap in the numbers;</li>
 *   <li>the tail intent is raised (release) to the end of the record before a byte of it is written, and never
 *       lowered (a writer killed past this point left it high: the next one keeps the higher value), so a reader
 *       that copied a record can tell whether any writer may have touched it since;</li>
 *   <li>the record is written, then LATEST, then the tail (release): readers read only below the tail, so a record
 *       cut short by a kill is never read, and the next writer overwrites it.</li>
 * </ol>
 * A process that dies holding the lock may also have changed an entry without writing its record; the store's
 * repair then calls {@link #skip()}, so readers see a gap there too. Allocates nothing.
 */
final class EventRing {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private final MemorySegment map;
    private final ShmLayout lay;
    private final EntryTable entries;
    private final long mask;

    EventRing(MemorySegment map, ShmLayout lay, EntryTable entries) {
        this.map = map;
        this.lay = lay;
        this.entries = entries;
        this.mask = lay.ringBytes() - 1;
    }

    /**
     * Tells that entry {@code e} was stored or left for {@code type} ({@link ShmLayout#EVENT_STORED} and the
     * others): a record with the entry's key and value length. Under the store lock, while the entry's record still
     * holds its key.
     */
    void transmit(int type, int e) {
        long entry = lay.entry(e);
        int keyLength = Math.clamp(map.get(ValueLayout.JAVA_INT, entry + E_KEY_LENGTH), 0, MAX_KEY_BYTES);
        long sequence = word(H_EVENT_SEQ);
        setWord(H_EVENT_SEQ, sequence + 1);
        int length = (int) R_KEY + keyLength;
        long aligned = align(length);
        long tail = word(H_RING_TAIL);
        long offset = tail & mask;
        long toEnd = lay.ringBytes() - offset;
        long start = tail;
        if (toEnd < aligned) {
            raiseIntent(tail + toEnd + aligned);
            putHeader(offset, (int) toEnd, PADDING);
            start = tail + toEnd;
            offset = 0;
        } else {
            raiseIntent(tail + aligned);
        }
        long at = lay.ringOffset() + offset;
        map.set(ValueLayout.JAVA_LONG, at + R_SEQUENCE, sequence);
        map.set(ValueLayout.JAVA_LONG, at + R_BYTES, entries.valueLength(e));
        map.set(ValueLayout.JAVA_INT, at + R_KEY_LENGTH, keyLength);
        if (ShmTestHooks.EVENT_PAUSE_MS > 0) {
            ShmTestHooks.pause(ShmTestHooks.EVENT_PAUSE_MS);
        }
        MemorySegment.copy(map, entry + E_KEY, map, at + R_KEY, keyLength);
        putHeader(offset, length, type);
        LONG.set(map, H_RING_LATEST, start);
        LONG.setRelease(map, H_RING_TAIL, start + aligned);
    }

    /** Skips a sequence number: readers see a gap where a dead lock holder may have left a change untold. */
    void skip() {
        setWord(H_EVENT_SEQ, word(H_EVENT_SEQ) + 1);
    }

    /** The number the next record gets. */
    long nextSequence() {
        return word(H_EVENT_SEQ);
    }

    private void putHeader(long offset, int length, int type) {
        long at = lay.ringOffset() + offset;
        map.set(ValueLayout.JAVA_INT, at + R_TYPE, type);
        map.set(ValueLayout.JAVA_INT, at + R_LENGTH, length);
    }

    /** Raises the tail intent to {@code intent} unless a dead writer left it higher, and fences the record after. */
    private void raiseIntent(long intent) {
        if (intent > word(H_RING_TAIL_INTENT)) {
            LONG.setRelease(map, H_RING_TAIL_INTENT, intent);
        }
        VarHandle.storeStoreFence();
    }

    private long word(long offset) {
        return (long) LONG.get(map, offset);
    }

    private void setWord(long offset, long value) {
        LONG.set(map, offset, value);
    }

    static long align(long length) {
        return (length + RECORD_ALIGNMENT - 1) & -RECORD_ALIGNMENT;
    }
}
