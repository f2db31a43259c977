package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;

/**
 * The reading side of the event ring: a copying broadcast receiver in the style of Agrona's
 * {@code CopyBroadcastReceiver}. It starts at the ring's tail (events from before it are not replayed), copies each
 * record out of the mapping, then checks that no writer may have touched the record meanwhile: the tail intent must
 * still be less than a ring ahead of the record ({@link EventRing} says why that holds even after a writer was
 * killed). A receiver that the writers lapped jumps to the latest record and counts it; the sequence numbers then
 * skip, which is how its subscriber sees the gap. Numbers read from the file are checked before they are used, so a
 * damaged ring reads as a lap, never as an event. Not thread-safe: one per subscription.
 */
final class EventReceiver {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    /** Receives one decoded record. */
    @FunctionalInterface
    interface Handler {
        /**
         * @param type {@link ShmLayout#EVENT_STORED} or another event type
         * @param sequence the record's number
         * @param bytes the value's size in bytes
         * @param key the entry's key
         */
        void onRecord(int type, long sequence, long bytes, String key);
    }

    private final MemorySegment map;
    private final ShmLayout lay;
    private final long mask;
    /** A record's copy, on the heap (longs, so that its long fields are aligned): no arena to close. */
    private final MemorySegment scratch = MemorySegment.ofArray(new long[MAX_RECORD / 8]);
    private final byte[] keyBytes = new byte[MAX_KEY_BYTES];
    private long cursor;
    private long laps;

    EventReceiver(MemorySegment map, ShmLayout lay) {
        this.map = map;
        this.lay = lay;
        this.mask = lay.ringBytes() - 1;
        this.cursor = (long) LONG.getAcquire(map, H_RING_TAIL);
    }

    /**
     * Hands {@code handler} the records written since the last call, at most {@code limit}.
     *
     * @return how many records it handed over
     */
    int poll(Handler handler, int limit) {
        int n = 0;
        while (n < limit) {
            long tail = (long) LONG.getAcquire(map, H_RING_TAIL);
            if (cursor >= tail) {
                return n;
            }
            if (!intact(cursor)) {
                lapped();
                continue;
            }
            long offset = cursor & mask;
            long at = lay.ringOffset() + offset;
            int length = map.get(ValueLayout.JAVA_INT, at + R_LENGTH);
            int type = map.get(ValueLayout.JAVA_INT, at + R_TYPE);
            if (type == PADDING) {
                long toEnd = lay.ringBytes() - offset;
                if (length != toEnd || !intact(cursor)) {
                    lapped();
                } else {
                    cursor += toEnd;
                }
                continue;
            }
            long aligned = EventRing.align(length);
            if (length < R_KEY || length > MAX_RECORD || offset + aligned > lay.ringBytes()) {
                lapped();
                continue;
            }
            MemorySegment.copy(map, at, scratch, 0, length);
            VarHandle.loadLoadFence();
            if (!intact(cursor)) {
                lapped();
                continue;
            }
            cursor += aligned;
            int keyLength = scratch.get(ValueLayout.JAVA_INT, R_KEY_LENGTH);
            if (keyLength != length - R_KEY) {
                laps++;
                continue;
            }
            MemorySegment.copy(scratch, ValueLayout.JAVA_BYTE, R_KEY, keyBytes, 0, keyLength);
            handler.onRecord(type, scratch.get(ValueLayout.JAVA_LONG, R_SEQUENCE),
                    scratch.get(ValueLayout.JAVA_LONG, R_BYTES), new String(keyBytes, 0, keyLength,
                            StandardCharsets.UTF_8));
            n++;
        }
        return n;
    }

    /** Times this receiver was lapped (or met a record that did not check out) and skipped ahead. */
    long laps() {
        return laps;
    }

    /** Whether no writer may have started overwriting the record at {@code position} yet. */
    private boolean intact(long position) {
        return position + lay.ringBytes() > (long) LONG.getVolatile(map, H_RING_TAIL_INTENT);
    }

    /** Skips to the latest record, or to the tail when even that cannot be trusted. */
    private void lapped() {
        laps++;
        long latest = (long) LONG.getAcquire(map, H_RING_LATEST);
        long tail = (long) LONG.getAcquire(map, H_RING_TAIL);
        cursor = latest > cursor && latest < tail && intact(latest) ? latest : tail;
    }
}
