package dev.kvconnector.lmcache.server;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Off-heap value memory from the C library's {@code malloc} and {@code free}, bound once through FFM.
 *
 * <p>Why malloc rather than arenas or slabs: values range from kilobytes to gigabytes and live until evicted in
 * any order. An arena per value is the cost the project forbids (a shared arena's close is a global handshake),
 * and a slab allocator would need its own fragmentation handling for such sizes. glibc's malloc is thread-safe,
 * costs well under a microsecond for small blocks, and serves large blocks with {@code mmap}, so an evicted
 * large value goes straight back to the operating system.
 */
final class NativeHeap {
    private final AtomicLong bytesInUse = new AtomicLong();

    /**
     * Allocates {@code bytes} (> 0) of uninitialized native memory, or returns null when malloc fails.
     * The segment has global scope: only {@link #free} releases it.
     */
    @SuppressWarnings("restricted")
    MemorySegment allocate(long bytes) {
        MemorySegment raw;
        try {
            raw = (MemorySegment) Symbols.MALLOC.invokeExact(bytes);
        } catch (Throwable t) {
            throw KVException.of(ErrorCode.INTERNAL, "malloc(" + bytes + ") threw").cause(t).build();
        }
        if (raw.equals(MemorySegment.NULL)) {
            return null;
        }
        bytesInUse.addAndGet(bytes);
        return raw.reinterpret(bytes);
    }

    /** Frees a segment returned by {@link #allocate}. */
    void free(MemorySegment segment) {
        try {
            Symbols.FREE.invokeExact(segment);
        } catch (Throwable t) {
            throw KVException.of(ErrorCode.INTERNAL, "free(" + segment + ") threw").cause(t).build();
        }
        bytesInUse.addAndGet(-segment.byteSize());
    }

    /** Bytes allocated and not yet freed. */
    long bytesInUse() {
        return bytesInUse.get();
    }

    /** The two symbols, looked up on first use. */
    private static final class Symbols {
        static final MethodHandle MALLOC;
        static final MethodHandle FREE;

        static {
            Linker linker = Linker.nativeLinker();
            try {
                MALLOC = downcall(linker, "malloc", FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
                FREE = downcall(linker, "free", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
            } catch (IllegalCallerException e) {
                throw KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING,
                                "native access is disabled, so the LMCache server cannot allocate off-heap values")
                        .hint("run java with --enable-native-access=ALL-UNNAMED").cause(e).build();
            }
        }

        @SuppressWarnings("restricted")
        private static MethodHandle downcall(Linker linker, String name, FunctionDescriptor fd) {
            MemorySegment symbol = linker.defaultLookup().find(name).orElseThrow(() ->
                    KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING, "the C library has no '" + name + "' symbol")
                            .hint("the LMCache server needs a platform whose C library the JVM's default lookup sees")
                            .build());
            return linker.downcallHandle(symbol, fd);
        }

        private Symbols() {
        }
    }
}
