package dev.kvconnector.valkey.resp;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * A small direct-mapped cache of {@link ByteBuffer} views of native segments. {@code MemorySegment.asByteBuffer()}
 * allocates a view object per call; KV staging segments come from pools and recur, so caching the view keeps the
 * steady-state put/get path free of allocation. A cached view is reused only for a segment with the same address,
 * size, scope and read-only flag, so a view never outlives the memory it was made for. Not thread-safe: one per
 * connection.
 */
final class SegmentViews {
    private static final int SLOTS = 256;
    private final MemorySegment[] segments = new MemorySegment[SLOTS];
    private final ByteBuffer[] views = new ByteBuffer[SLOTS];

    /** A cleared view of {@code s}, a native segment of at most {@code Integer.MAX_VALUE} bytes. */
    ByteBuffer of(MemorySegment s) {
        long a = s.address();
        int i = (int) ((a >>> 12) ^ (a >>> 24) ^ s.byteSize()) & (SLOTS - 1);
        MemorySegment c = segments[i];
        if (c != null && c.address() == a && c.byteSize() == s.byteSize() && c.scope() == s.scope()
                && c.isReadOnly() == s.isReadOnly()) {
            return views[i].clear();
        }
        ByteBuffer v = s.asByteBuffer();
        segments[i] = s;
        views[i] = v;
        return v;
    }
}
