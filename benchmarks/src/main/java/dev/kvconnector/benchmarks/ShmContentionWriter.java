package dev.kvconnector.benchmarks;

import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Base64;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.BackoffIdleStrategy;

/**
 * One writer process of {@link ShmContentionBenchmark}: a JVM that opens the benchmark's {@code shm:} store and its
 * lock-model file once, then runs timed windows of one workload when told, at the same wall-clock instant as the
 * other writers, and sends back a latency histogram.
 *
 * <p>Started as {@code ShmContentionWriter INDEX STORE_URI LOCK_FILE}; answers {@code R} on stdout once both are
 * open. Each line on stdin is a command:
 * <ul>
 *   <li>{@code RUN WORKLOAD BYTES START_EPOCH_MS WARM_MS MEASURE_MS}: sleeps until {@code START_EPOCH_MS} (the
 *       wall clock all processes share), runs the workload untimed for {@code WARM_MS}, then records each
 *       operation's latency for {@code MEASURE_MS}, and answers one line
 *       {@code DONE OPS LOCK_HOLDS CPU_NANOS BASE64_HISTOGRAM}: the operations and the CPU time of the timed window,
 *       the lock-model holds of the whole run, and the latencies (HdrHistogram, nanoseconds, compressed);</li>
 *   <li>{@code Q}, or the end of stdin: closes the store and exits. A benchmark JVM killed outright closes the pipe,
 *       so a writer never outlives it by more than its current window.</li>
 * </ul>
 * Workloads, one operation each (values are {@code BYTES} bytes of {@link LayerShape#randomSegment}, each writer
 * under its own key):
 * <ul>
 *   <li>{@code store}: {@code put} then {@code remove} of the key in the {@code shm:} store, which takes the store's
 *       cross-process lock three times (allocation, publication, removal). The first operation of each window also
 *       reads the value back and compares every byte; any miss fails the window.</li>
 *   <li>{@code lock-long-spin}, {@code lock-short-spin}, {@code lock-agrona}: a model of the same operation on a
 *       bare cross-process lock, a CAS of one word of a mapped {@code /dev/shm} file from 0 to this process's token,
 *       released with a release store of 0: three lock holds (each a read-modify-write of a shared counter and four
 *       other shared words, about what the store's allocation, index swap and removal touch, the third also reading
 *       64 words as the removal reads lease records), with the value copied into this writer's own region of the
 *       file between the first and the second. A failed check waits as {@link Backoff} says: the store lock's
 *       back-off before and after it was measured here ({@code long-spin}: 200 {@code onSpinWait}, then
 *       {@code Thread.yield} to 2000, then 50 us parks; {@code short-spin}: 10 spins, 5 yields, then 50 us parks),
 *       or Agrona's {@code BackoffIdleStrategy} with its defaults (10 spins, 5 yields, then parks from 1 us doubling
 *       to 1 ms). The shared counter is incremented with a plain load and store, so the benchmark's check that it
 *       equals the sum of all writers' lock holds fails if the lock ever let two holders in.</li>
 * </ul>
 * Nothing is allocated per operation: the histogram records into its own arrays and keys are built once.
 */
final class ShmContentionWriter {
    /** Longest latency the histogram tracks: 60 s in nanoseconds. */
    static final long HIGHEST_NANOS = 60_000_000_000L;
    /** Significant decimal digits of the histogram. */
    static final int DIGITS = 3;

    /** Lock-model file layout: the lock word, then the shared words on their own cache lines, then the values. */
    static final long LOCK_WORD = 0;
    static final long COUNTER_WORD = 64;
    static final long SHARED_WORDS = 128;
    static final int SHARED_WORD_COUNT = 4;
    static final long SCANNED = 512;
    static final int SCAN_WORDS = 64;
    static final long REGIONS = 4096;
    /** Largest value a writer copies into the lock-model file, and so the size of its region there. */
    static final long MAX_BYTES = 4L << 20;
    /** Writers the lock-model file has room for. */
    static final int MAX_WRITERS = 8;
    static final long LOCK_FILE_BYTES = REGIONS + MAX_WRITERS * MAX_BYTES;

    /** The park of {@link Backoff#LONG_SPIN} and {@link Backoff#SHORT_SPIN}. */
    static final long PARK_NANOS = 50_000;

    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private final int index;
    private final long token;
    private final KVStore kv;
    private final MemorySegment lockMap;
    private final MemorySegment source;
    private final MemorySegment check;
    private final String key;
    private final BackoffIdleStrategy agrona = new BackoffIdleStrategy();
    private long lockHolds;

    private ShmContentionWriter(int index, KVStore kv, MemorySegment lockMap, Arena arena) {
        this.index = index;
        this.token = ProcessHandle.current().pid() << 8 | (index + 1);
        this.kv = kv;
        this.lockMap = lockMap;
        this.source = LayerShape.randomSegment(arena, MAX_BYTES);
        this.check = arena.allocate(MAX_BYTES, LayerShape.ALIGNMENT);
        this.key = "bench/contention/writer-" + index;
    }

    /** The writer's entry point: {@code INDEX STORE_URI LOCK_FILE}. */
    public static void main(String[] args) throws IOException {
        int index = Integer.parseInt(args[0]);
        if (index < 0 || index >= MAX_WRITERS) {
            throw new IllegalArgumentException("writer index " + index + " outside 0.." + (MAX_WRITERS - 1));
        }
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.US_ASCII);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        try (Arena arena = Arena.ofShared(); KVStore kv = KVStores.open(args[1])) {
            MemorySegment lockMap;
            try (FileChannel ch = FileChannel.open(Path.of(args[2]), StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                lockMap = ch.map(FileChannel.MapMode.READ_WRITE, 0, LOCK_FILE_BYTES, arena);
            }
            ShmContentionWriter w = new ShmContentionWriter(index, kv, lockMap, arena);
            out.println("R");
            for (String line = in.readLine(); line != null && !line.equals("Q"); line = in.readLine()) {
                out.println(w.run(line.split(" ")));
            }
        }
    }

    /** Runs one {@code RUN} command and returns its answer line. */
    private String run(String[] cmd) {
        if (cmd.length != 6 || !cmd[0].equals("RUN")) {
            throw new IllegalArgumentException("writer " + index + ": unknown command " + String.join(" ", cmd));
        }
        String workload = cmd[1];
        long bytes = Long.parseLong(cmd[2]);
        if (bytes <= 0 || bytes > MAX_BYTES) {
            throw new IllegalArgumentException("writer " + index + ": value size " + bytes + " outside 1.."
                    + MAX_BYTES);
        }
        long startAt = Long.parseLong(cmd[3]);
        long warmNanos = Long.parseLong(cmd[4]) * 1_000_000;
        long measureNanos = Long.parseLong(cmd[5]) * 1_000_000;
        MemorySegment value = source.asSlice(0, bytes);
        Histogram latency = new Histogram(HIGHEST_NANOS, DIGITS);
        long holdsBefore = lockHolds;
        long wait = startAt - System.currentTimeMillis();
        if (wait > 0) {
            LockSupport.parkNanos(wait * 1_000_000);
        }
        Backoff backoff = Backoff.of(workload);
        boolean store = workload.equals("store");
        if (store) {
            verifiedStoreOp(value);
        } else if (backoff == null) {
            throw new IllegalArgumentException("writer " + index + ": unknown workload " + workload);
        }
        long t0 = System.nanoTime();
        long measureFrom = t0 + warmNanos;
        while (t0 < measureFrom) {
            op(store, value, backoff);
            t0 = System.nanoTime();
        }
        long cpuBefore = THREADS.getCurrentThreadCpuTime();
        long ops = 0;
        for (long end = measureFrom + measureNanos; t0 < end; ops++) {
            op(store, value, backoff);
            long t1 = System.nanoTime();
            latency.recordValue(Math.min(t1 - t0, HIGHEST_NANOS));
            t0 = t1;
        }
        long cpu = THREADS.getCurrentThreadCpuTime() - cpuBefore;
        ByteBuffer encoded = ByteBuffer.allocate(latency.getNeededByteBufferCapacity());
        latency.encodeIntoCompressedByteBuffer(encoded);
        encoded.flip();
        byte[] b = new byte[encoded.remaining()];
        encoded.get(b);
        return "DONE " + ops + " " + (lockHolds - holdsBefore) + " " + cpu + " "
                + Base64.getEncoder().encodeToString(b);
    }

    private void op(boolean store, MemorySegment value, Backoff backoff) {
        if (store) {
            storeOp(value);
        } else {
            lockOp(value, backoff);
        }
    }

    private void storeOp(MemorySegment value) {
        if (!kv.put(key, value, PutOptions.DEFAULT)) {
            throw new IllegalStateException("writer " + index + ": put of " + key + " was refused");
        }
        if (!kv.remove(key)) {
            throw new IllegalStateException("writer " + index + ": " + key + " was gone before its remove");
        }
    }

    /** One store operation with the value read back between the put and the remove, every byte compared. */
    private void verifiedStoreOp(MemorySegment value) {
        if (!kv.put(key, value, PutOptions.DEFAULT)) {
            throw new IllegalStateException("writer " + index + ": put of " + key + " was refused");
        }
        long got = kv.getInto(key, check);
        if (got != value.byteSize() || check.asSlice(0, got).mismatch(value) != -1) {
            throw new IllegalStateException("writer " + index + ": read back " + GetResult.describe(got) + " for "
                    + key + (got == value.byteSize() ? " with wrong bytes" : "") + ", " + value.byteSize()
                    + " bytes put");
        }
        if (!kv.remove(key)) {
            throw new IllegalStateException("writer " + index + ": " + key + " was gone before its remove");
        }
    }

    /** The lock model of one put and remove: three holds, the value copied between the first and the second. */
    private void lockOp(MemorySegment value, Backoff backoff) {
        lockedUpdate(backoff, false);
        MemorySegment.copy(value, 0, lockMap, REGIONS + index * MAX_BYTES, value.byteSize());
        lockedUpdate(backoff, false);
        lockedUpdate(backoff, true);
    }

    /**
     * One lock hold. With {@code scan}, it also reads {@link #SCAN_WORDS} words volatile, as a removal reads the
     * process's lease records under the store lock; that makes the model's uncontended operation take about as long
     * as the store's (0.2 us for a 4 KiB put, 0.4 us for its removal), most of it under the lock.
     */
    private void lockedUpdate(Backoff backoff, boolean scan) {
        lock(backoff);
        long n = lockMap.get(ValueLayout.JAVA_LONG, COUNTER_WORD);
        for (int i = 0; i < SHARED_WORD_COUNT; i++) {
            long off = SHARED_WORDS + i * 64L;
            lockMap.set(ValueLayout.JAVA_LONG, off, lockMap.get(ValueLayout.JAVA_LONG, off) + token);
        }
        if (scan) {
            long seen = 0;
            for (int i = 0; i < SCAN_WORDS; i++) {
                seen |= (long) LONG.getVolatile(lockMap, SCANNED + i * 8L);
            }
            if (seen != 0) {
                throw new IllegalStateException("writer " + index + ": the lock model's scanned words are not zero");
            }
        }
        lockMap.set(ValueLayout.JAVA_LONG, COUNTER_WORD, n + 1);
        lockHolds++;
        LONG.setRelease(lockMap, LOCK_WORD, 0L);
    }

    /** {@code ShmLock.lock()}'s loop without its timeout and dead-owner checks (which never fire here). */
    private void lock(Backoff backoff) {
        agrona.reset();
        for (long spins = 0; ; spins++) {
            if ((long) LONG.getVolatile(lockMap, LOCK_WORD) == 0) {
                if (LONG.compareAndSet(lockMap, LOCK_WORD, 0L, token)) {
                    return;
                }
                continue;
            }
            if (backoff == Backoff.AGRONA) {
                agrona.idle();
            } else if (spins < backoff.spins) {
                Thread.onSpinWait();
            } else if (spins < backoff.spins + backoff.yields) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(PARK_NANOS);
            }
        }
    }

    /** How a lock-model writer waits for the lock; {@link #of} maps the workload names. */
    enum Backoff {
        /** 200 {@code onSpinWait}, then {@code Thread.yield} to 2000, then 50 us parks. */
        LONG_SPIN(200, 1800),
        /** 10 {@code onSpinWait}, then 5 {@code Thread.yield}, then 50 us parks. */
        SHORT_SPIN(10, 5),
        /** Agrona's {@code BackoffIdleStrategy} with its defaults: 10 spins, 5 yields, parks 1 us doubling to 1 ms. */
        AGRONA(0, 0);

        final long spins;
        final long yields;

        Backoff(long spins, long yields) {
            this.spins = spins;
            this.yields = yields;
        }

        /** The back-off of a lock-model workload ({@code lock-long-spin}, ...), or null for another workload. */
        static Backoff of(String workload) {
            return switch (workload) {
                case "lock-long-spin" -> LONG_SPIN;
                case "lock-short-spin" -> SHORT_SPIN;
                case "lock-agrona" -> AGRONA;
                default -> null;
            };
        }
    }
}
