package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.Control;

/**
 * Agrona against plain FFM for what the {@code shm:} store does with its mapped file, as issue 3 asks: the same
 * operations on the same mapping of a {@code /dev/shm} file, once through {@code MemorySegment} and
 * {@code ValueLayout.JAVA_LONG.varHandle()} (what {@code ShmStore} uses) and once through Agrona's
 * {@code UnsafeBuffer} wrapping the mapping's address (what Aeron does with its CnC file):
 * <ul>
 *   <li>{@code *CopyIn}, {@code *CopyOut}: a value of {@link #bytes} bytes from a native segment into the mapping
 *       (a put's copy) and back out (a get's copy): {@code MemorySegment.copy} against
 *       {@code UnsafeBuffer.putBytes/getBytes};</li>
 *   <li>{@code *Lock}: the store lock's uncontended round trip, a CAS of a word from 0 to a token and a release
 *       store of 0: {@code VarHandle.compareAndSet/setRelease} against
 *       {@code UnsafeBuffer.compareAndSetLong/putLongRelease};</li>
 *   <li>{@code *Slot}: an index slot's publish and probe, a volatile store of one slot and a volatile load of the next,
 *       walking a table of 4096 slots;</li>
 *   <li>{@code oursBackoff}, {@code agronaBackoff}: waiting, two threads handing a counter back and forth through two
 *       shared words, each waiting for the other with {@code ShmStore}'s first backoff (200 {@code onSpinWait}, then
 *       {@code Thread.yield} to 2000, then 50 us parks) or Agrona's {@code BackoffIdleStrategy} with its defaults
 *       (10 spins, 5 yields, parks from 1 us doubling to 1 ms). The score is one thread's time per round trip.</li>
 * </ul>
 * The copies are sampled (medians in microseconds, robust to the noise of a shared machine); the word operations
 * and the waits are averaged in nanoseconds. Agrona 2.x reaches {@code jdk.internal.misc.Unsafe}, so this
 * benchmark's forked JVM, and only it, runs with {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED};
 * the FFM methods run in that same JVM, so both sides share every condition. Results and the decision they led
 * to: {@code benchmarks/README.md} and the {@code dev.kvconnector.store.shm} package comment. {@code run.sh} does
 * not run this class; run it with {@code java -jar benchmarks/target/benchmarks.jar AgronaShmComparison -prof gc},
 * or one method per invocation in the order FFM, Agrona, Agrona, FFM where the machine's load drifts.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED",
        "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED"})
public class AgronaShmComparison {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final long LOCK = 0;
    private static final long SLOTS = 4096;
    private static final long SLOT_BASE = 4096;
    private static final long PAYLOAD = SLOT_BASE + SLOTS * 8;
    private static final long TOKEN = ProcessHandle.current().pid() << 20 | 1;

    /** Value size; 4 MiB is one Llama-3-8B layer at 1024 tokens. */
    @Param({"4194304"})
    public int bytes;

    private Path file;
    private Arena arena;
    private MemorySegment map;
    private UnsafeBuffer mapBuffer;
    private MemorySegment src;
    private MemorySegment dst;
    private UnsafeBuffer srcBuffer;
    private UnsafeBuffer dstBuffer;
    private long slot;

    /** Creates and maps the file, touches every page of it, and fills the source. */
    @Setup(Level.Trial)
    public void setUp() throws IOException {
        long size = PAYLOAD + bytes;
        file = Files.createTempFile(Path.of("/dev/shm"), "kvc-agrona-", ".bench");
        arena = Arena.ofShared();
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            map = ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
        }
        map.fill((byte) 0);
        mapBuffer = new UnsafeBuffer(map.address(), Math.toIntExact(size));
        src = LayerShape.randomSegment(arena, bytes);
        dst = arena.allocate(bytes, LayerShape.ALIGNMENT);
        srcBuffer = new UnsafeBuffer(src.address(), bytes);
        dstBuffer = new UnsafeBuffer(dst.address(), bytes);
        agronaCopyIn();
        agronaCopyOut();
        if (src.mismatch(dst) != -1) {
            throw new IllegalStateException("Agrona's copy through the mapping changed the bytes");
        }
    }

    /** Unmaps and deletes the file. */
    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        arena.close();
        Files.deleteIfExists(file);
    }

    /** A put's copy through FFM. */
    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    @OutputTimeUnit(TimeUnit.MICROSECONDS)
    public MemorySegment ffmCopyIn() {
        MemorySegment.copy(src, 0, map, PAYLOAD, bytes);
        return map;
    }

    /** A put's copy through Agrona. */
    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    @OutputTimeUnit(TimeUnit.MICROSECONDS)
    public UnsafeBuffer agronaCopyIn() {
        mapBuffer.putBytes((int) PAYLOAD, srcBuffer, 0, bytes);
        return mapBuffer;
    }

    /** A get's copy through FFM. */
    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    @OutputTimeUnit(TimeUnit.MICROSECONDS)
    public MemorySegment ffmCopyOut() {
        MemorySegment.copy(map, PAYLOAD, dst, 0, bytes);
        return dst;
    }

    /** A get's copy through Agrona. */
    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    @OutputTimeUnit(TimeUnit.MICROSECONDS)
    public UnsafeBuffer agronaCopyOut() {
        mapBuffer.getBytes((int) PAYLOAD, dstBuffer, 0, bytes);
        return dstBuffer;
    }

    /** The lock's uncontended round trip through FFM, as {@code ShmStore} takes and releases it. */
    @Benchmark
    public boolean ffmLock() {
        boolean got = LONG.compareAndSet(map, LOCK, 0L, TOKEN);
        LONG.setRelease(map, LOCK, 0L);
        return got;
    }

    /** The same through Agrona. */
    @Benchmark
    public boolean agronaLock() {
        boolean got = mapBuffer.compareAndSetLong((int) LOCK, 0L, TOKEN);
        mapBuffer.putLongRelease((int) LOCK, 0L);
        return got;
    }

    /** Publishes one index slot and probes the next through FFM. */
    @Benchmark
    public long ffmSlot() {
        long i = slot;
        slot = (i + 1) & (SLOTS - 1);
        LONG.setVolatile(map, SLOT_BASE + i * 8, i);
        return (long) LONG.getVolatile(map, SLOT_BASE + slot * 8);
    }

    /** The same through Agrona. */
    @Benchmark
    public long agronaSlot() {
        long i = slot;
        slot = (i + 1) & (SLOTS - 1);
        mapBuffer.putLongVolatile((int) (SLOT_BASE + i * 8), i);
        return mapBuffer.getLongVolatile((int) (SLOT_BASE + slot * 8));
    }

    /** Two words two threads hand a counter through. */
    @State(Scope.Group)
    public static class PingPong {
        private static final long PING = 0;
        private static final long PONG = 64;
        Arena arena;
        MemorySegment words;

        /** Allocates the words, a cache line apart. */
        @Setup(Level.Trial)
        public void setUp() {
            arena = Arena.ofShared();
            words = arena.allocate(128, 64);
        }

        /** Frees them. */
        @TearDown(Level.Trial)
        public void tearDown() {
            arena.close();
        }
    }

    /** The waiting side's state: how it waits, and where it is in the exchange. */
    @State(Scope.Thread)
    public static class Waiter {
        final BackoffIdleStrategy agrona = new BackoffIdleStrategy();
        long seen;
    }

    /**
     * {@code ShmLock.lock()}'s first backoff, one step per failed check; the lock now waits as Agrona does, chosen
     * by {@link ShmContentionBenchmark}.
     */
    private static void oursIdle(long spins) {
        if (spins < 200) {
            Thread.onSpinWait();
        } else if (spins < 2000) {
            Thread.yield();
        } else {
            LockSupport.parkNanos(50_000);
        }
    }

    /** Ping side, waiting with our backoff. */
    @Benchmark
    @Group("oursBackoff")
    @GroupThreads(1)
    public long oursPing(PingPong p, Waiter w, Control ctl) {
        long next = ++w.seen;
        LONG.setRelease(p.words, PingPong.PING, next);
        for (long spins = 0; (long) LONG.getAcquire(p.words, PingPong.PONG) < next && !ctl.stopMeasurement; spins++) {
            oursIdle(spins);
        }
        return next;
    }

    /** Pong side, waiting with our backoff. */
    @Benchmark
    @Group("oursBackoff")
    @GroupThreads(1)
    public long oursPong(PingPong p, Waiter w, Control ctl) {
        long ping;
        for (long spins = 0; (ping = (long) LONG.getAcquire(p.words, PingPong.PING)) <= w.seen
                && !ctl.stopMeasurement; spins++) {
            oursIdle(spins);
        }
        w.seen = ping;
        LONG.setRelease(p.words, PingPong.PONG, ping);
        return ping;
    }

    /** Ping side, waiting with Agrona's {@code BackoffIdleStrategy}. */
    @Benchmark
    @Group("agronaBackoff")
    @GroupThreads(1)
    public long agronaPing(PingPong p, Waiter w, Control ctl) {
        long next = ++w.seen;
        LONG.setRelease(p.words, PingPong.PING, next);
        w.agrona.reset();
        while ((long) LONG.getAcquire(p.words, PingPong.PONG) < next && !ctl.stopMeasurement) {
            w.agrona.idle();
        }
        return next;
    }

    /** Pong side, waiting with Agrona's {@code BackoffIdleStrategy}. */
    @Benchmark
    @Group("agronaBackoff")
    @GroupThreads(1)
    public long agronaPong(PingPong p, Waiter w, Control ctl) {
        long ping;
        w.agrona.reset();
        while ((ping = (long) LONG.getAcquire(p.words, PingPong.PING)) <= w.seen && !ctl.stopMeasurement) {
            w.agrona.idle();
        }
        w.seen = ping;
        LONG.setRelease(p.words, PingPong.PONG, ping);
        return ping;
    }
}
