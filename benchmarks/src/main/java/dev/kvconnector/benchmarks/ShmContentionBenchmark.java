package dev.kvconnector.benchmarks;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.zip.DataFormatException;
import org.HdrHistogram.Histogram;

/**
 * Lock contention in the {@code shm:} store between writer processes: 1, 2 and 4 JVMs
 * ({@link ShmContentionWriter}) put and remove values of their own keys in one store at once, and the figures for
 * 2 and 4 are set beside the single writer's, measured in the same run. Per case it prints each operation's
 * latency percentiles over all writers (p50, p99, p99.9) and the writers' aggregate operations per second, and the
 * ratios of those to the one-writer case, and
 * the CPUs the writers got (their CPU time over the window): on a shared machine, 2 writers that got 1 CPU between
 * them say that something else held the other, and the row cannot show contention between two cores.
 *
 * <p>Workloads (see {@link ShmContentionWriter}): {@code store}, the real store's {@code put} + {@code remove}; and
 * {@code lock-long-spin}, {@code lock-short-spin}, {@code lock-agrona}, a model of the same three lock holds on a
 * bare CAS lock in a mapped {@code /dev/shm} file, waiting with the store lock's back-off before and after this
 * benchmark measured it, or with Agrona's {@code BackoffIdleStrategy}, so that back-offs are compared under the
 * same contention without a switch in the store. Value sizes ({@code --sizes}, for the store): 4 KiB (the lock
 * dominates) and 4 MiB (one Llama-3-8B layer at 1024 tokens; the copy dominates); the lock models run at
 * {@code --model-sizes}, 4 KiB.
 *
 * <p>Why a plain {@code main} and not JMH: three of the four writers are other JVMs, whose latencies JMH cannot
 * sample, so they would have to record and ship their own histograms anyway; the aggregate rate needs one window
 * common to all processes, which JMH's iterations do not give to processes outside its fork; and the process count
 * is the parameter that matters, which here is a child started or not rather than a {@code @Param} that would
 * restart every JVM per value. So every writer, the single one included, is a child JVM doing the same thing, and
 * this JVM only coordinates: it starts the writers once (so they stay JIT-compiled and their pages of the file
 * stay mapped across cases), gives each case a start instant on the shared wall clock, an untimed warm-up and a
 * timed window, and merges the HdrHistograms the writers send back. Each workload and size first runs one
 * untimed window on all writers (their JIT warm-up and first touch of the file's pages). Rounds alternate the
 * order of the process counts (1, 2, 4, then 4, 2, 1) so that a drift in the machine's load hits all counts alike.
 *
 * <p>No child is orphaned: they are asked to quit at the end and killed after 5 s, a shutdown hook kills them if
 * this JVM exits otherwise, and a writer whose stdin closes (this JVM killed outright) exits after its current
 * window. The store's file and the lock-model file carry {@link StoreFixture}'s {@code {unique}} and are removed
 * at the end.
 *
 * <p>Run (after {@code ./mvnw -q install -DskipTests}), under the measurement lock on a shared machine:
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp benchmarks/target/benchmarks.jar \
 *     dev.kvconnector.benchmarks.ShmContentionBenchmark [--procs 1,2,4] [--sizes 4096,4194304] \
 *     [--model-sizes 4096] [--workloads store,lock-long-spin,lock-short-spin,lock-agrona] \
 *     [--warm-ms 700] [--measure-ms 1500] [--rounds 2] [--out FILE]
 * </pre>
 * Results and the decision they led to: {@code benchmarks/README.md} and the {@code dev.kvconnector.store.shm}
 * package comment.
 */
public final class ShmContentionBenchmark {
    private static final long QUIT_WAIT_MS = 5_000;
    /** Time the coordinator gives every writer to read its command before the common start instant. */
    private static final long START_DELAY_MS = 300;

    private ShmContentionBenchmark() {
    }

    /** One case's figures, merged over its writers and rounds. */
    record Result(String workload, long bytes, int procs, Histogram latency, long ops, long cpuNanos,
                  long windowNanos) {
        double opsPerSecond() {
            return ops * 1e9 / windowNanos;
        }

        /** CPUs the writers got, on average over the window: their CPU time over the window's length. */
        double cpus() {
            return (double) cpuNanos / windowNanos;
        }

        double micros(double percentile) {
            return latency.getValueAtPercentile(percentile) / 1000.0;
        }
    }

    /** Entry point; see the class comment for the arguments. */
    public static void main(String[] args) throws IOException {
        Map<String, String> opt = options(args);
        int[] procs = ints(opt.getOrDefault("procs", "1,2,4"));
        long[] sizes = longs(opt.getOrDefault("sizes", "4096,4194304"));
        long[] modelSizes = longs(opt.getOrDefault("model-sizes", "4096"));
        if (Arrays.stream(sizes).anyMatch(b -> b < 1 || b > ShmContentionWriter.MAX_BYTES)
                || Arrays.stream(modelSizes).anyMatch(b -> b < 1 || b > ShmContentionWriter.MAX_BYTES)) {
            throw new IllegalArgumentException("--sizes and --model-sizes must be from 1 to "
                    + ShmContentionWriter.MAX_BYTES + " bytes");
        }
        String[] workloads = opt.getOrDefault("workloads", "store,lock-long-spin,lock-short-spin,lock-agrona")
                .split(",");
        long warmMs = Long.parseLong(opt.getOrDefault("warm-ms", "700"));
        long measureMs = Long.parseLong(opt.getOrDefault("measure-ms", "1500"));
        int rounds = Integer.parseInt(opt.getOrDefault("rounds", "2"));
        int most = Arrays.stream(procs).max().orElseThrow();
        if (most > ShmContentionWriter.MAX_WRITERS || Arrays.stream(procs).anyMatch(p -> p < 1)) {
            throw new IllegalArgumentException("--procs must be from 1 to " + ShmContentionWriter.MAX_WRITERS);
        }
        String loadBefore = loadAverage();
        List<Result> results;
        try (StoreFixture fixture = StoreFixture.start("shm:/kvc-contention-{unique}?capacity=64MiB")) {
            String name = fixture.uri().substring("shm:/".length(), fixture.uri().indexOf('?'));
            Path lockFile = Path.of("/dev/shm", name + ".lock-model");
            try (FileChannel ch = FileChannel.open(lockFile, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                ch.write(ByteBuffer.allocate(1), ShmContentionWriter.LOCK_FILE_BYTES - 1);
            }
            results = measure(fixture.uri(), lockFile, most, procs, sizes, modelSizes, workloads, warmMs,
                    measureMs, rounds);
        }
        String report = report(results, procs, loadBefore, loadAverage(), warmMs, measureMs, rounds);
        System.out.print(report);
        if (opt.containsKey("out")) {
            Path out = Path.of(opt.get("out"));
            if (out.getParent() != null) {
                Files.createDirectories(out.getParent());
            }
            Files.writeString(out, report);
        }
    }

    private static List<Result> measure(String uri, Path lockFile, int most, int[] procs, long[] sizes,
                                        long[] modelSizes, String[] workloads, long warmMs, long measureMs,
                                        int rounds) {
        List<Writer> writers = new ArrayList<>();
        try {
            for (int i = 0; i < most; i++) {
                writers.add(Writer.start(i, uri, lockFile));
            }
            Map<String, Result> merged = new LinkedHashMap<>();
            for (String workload : workloads) {
                for (long bytes : workload.equals("store") ? sizes : modelSizes) {
                    runCase(writers, lockFile, workload, bytes, warmMs, measureMs);
                    for (int r = 0; r < rounds; r++) {
                        for (int k = 0; k < procs.length; k++) {
                            int n = procs[r % 2 == 0 ? k : procs.length - 1 - k];
                            Result one = runCase(writers.subList(0, n), lockFile, workload, bytes, warmMs, measureMs);
                            merged.merge(workload + " " + bytes + " " + n, one, ShmContentionBenchmark::add);
                            System.err.printf(Locale.ROOT, "%s %d B, %d writer(s), round %d: p50 %s us, p99 %s us,"
                                    + " %.0f ops/s%n", workload, bytes, n, r + 1, us(one.micros(50)),
                                    us(one.micros(99)), one.opsPerSecond());
                        }
                    }
                }
            }
            return List.copyOf(merged.values());
        } finally {
            for (Writer w : writers) {
                w.close();
            }
        }
    }

    /** Runs one window on {@code writers} at once and merges what they send back. */
    private static Result runCase(List<Writer> writers, Path lockFile, String workload, long bytes, long warmMs,
                                  long measureMs) {
        boolean model = !workload.equals("store");
        long counterBefore = model ? counter(lockFile) : 0;
        long startAt = System.currentTimeMillis() + START_DELAY_MS;
        String cmd = "RUN " + workload + " " + bytes + " " + startAt + " " + warmMs + " " + measureMs;
        for (Writer w : writers) {
            w.send(cmd);
        }
        Histogram all = new Histogram(ShmContentionWriter.HIGHEST_NANOS, ShmContentionWriter.DIGITS);
        long ops = 0;
        long holds = 0;
        long cpu = 0;
        for (Writer w : writers) {
            String[] done = w.answer().split(" ");
            ops += Long.parseLong(done[1]);
            holds += Long.parseLong(done[2]);
            cpu += Long.parseLong(done[3]);
            all.add(decode(done[4], w));
        }
        if (model && counter(lockFile) - counterBefore != holds) {
            throw new IllegalStateException("the lock model let two holders in: its counter in " + lockFile
                    + " rose by " + (counter(lockFile) - counterBefore) + " over " + holds + " lock holds ("
                    + workload + ", " + writers.size() + " writers)");
        }
        return new Result(workload, bytes, writers.size(), all, ops, cpu, TimeUnit.MILLISECONDS.toNanos(measureMs));
    }

    private static Histogram decode(String base64, Writer from) {
        try {
            return Histogram.decodeFromCompressedByteBuffer(ByteBuffer.wrap(Base64.getDecoder().decode(base64)), 0);
        } catch (DataFormatException e) {
            throw new IllegalStateException("writer JVM " + from.index + " sent a histogram that does not decode", e);
        }
    }

    private static Result add(Result a, Result b) {
        Histogram h = a.latency().copy();
        h.add(b.latency());
        return new Result(a.workload(), a.bytes(), a.procs(), h, a.ops() + b.ops(), a.cpuNanos() + b.cpuNanos(),
                a.windowNanos() + b.windowNanos());
    }

    /** Reads the lock model's shared counter, which every lock hold increments. */
    private static long counter(Path lockFile) {
        try (Arena arena = Arena.ofConfined(); FileChannel ch = FileChannel.open(lockFile, StandardOpenOption.READ)) {
            MemorySegment m = ch.map(FileChannel.MapMode.READ_ONLY, 0, 128, arena);
            return m.get(ValueLayout.JAVA_LONG, ShmContentionWriter.COUNTER_WORD);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the lock model's counter in " + lockFile, e);
        }
    }

    /** The table: one row per case, ratios against the one-writer case of the same workload and size. */
    static String report(List<Result> results, int[] procs, String loadBefore, String loadAfter, long warmMs,
                         long measureMs, int rounds) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "# shm: lock contention, %d CPUs, load average %s -> %s; %d round(s) of "
                + "%d ms warm-up + %d ms measured per case%n%n", Runtime.getRuntime().availableProcessors(),
                loadBefore, loadAfter, rounds, warmMs, measureMs));
        sb.append("| workload | value | writers | p50 us | p99 us | p99.9 us | ops/s (all writers) | p50 vs 1 | "
                + "p99 vs 1 | ops/s vs 1 | writer CPUs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Result r : results) {
            Result one = results.stream().filter(o -> o.workload().equals(r.workload()) && o.bytes() == r.bytes()
                    && o.procs() == 1).findFirst().orElse(null);
            sb.append(String.format(Locale.ROOT, "| %s | %s | %d | %s | %s | %s | %.0f | %s | %s | %s | %.2f |%n",
                    r.workload(), size(r.bytes()), r.procs(), us(r.micros(50)), us(r.micros(99)), us(r.micros(99.9)),
                    r.opsPerSecond(), ratio(r.micros(50), one == null ? 0 : one.micros(50)),
                    ratio(r.micros(99), one == null ? 0 : one.micros(99)),
                    ratio(r.opsPerSecond(), one == null ? 0 : one.opsPerSecond()), r.cpus()));
        }
        return sb.toString();
    }

    /** Microseconds to three significant digits (0.153, 12.4, 3410). */
    private static String us(double micros) {
        return String.format(Locale.ROOT, micros < 10 ? "%.3f" : micros < 100 ? "%.1f" : "%.0f", micros);
    }

    private static String ratio(double x, double base) {
        return base > 0 ? String.format(Locale.ROOT, "%.2fx", x / base) : "-";
    }

    private static String size(long bytes) {
        return bytes % (1 << 20) == 0 ? bytes / (1 << 20) + " MiB" : bytes % 1024 == 0 ? bytes / 1024 + " KiB"
                : bytes + " B";
    }

    private static String loadAverage() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).split(" ");
            return f[0] + " " + f[1] + " " + f[2];
        } catch (IOException e) {
            return "unknown";
        }
    }

    private static long[] longs(String csv) {
        return Arrays.stream(csv.split(",")).mapToLong(Long::parseLong).toArray();
    }

    private static int[] ints(String csv) {
        return Arrays.stream(csv.split(",")).mapToInt(Integer::parseInt).toArray();
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> opt = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 == args.length) {
                throw new IllegalArgumentException("expected --name value pairs, got '" + args[i] + "'; see the "
                        + "javadoc of " + ShmContentionBenchmark.class.getName());
            }
            opt.put(args[i].substring(2), args[++i]);
        }
        return opt;
    }

    /** A writer JVM and its control pipe. */
    private static final class Writer implements AutoCloseable {
        private final int index;
        private final Process process;
        private final PrintWriter toWriter;
        private final BufferedReader fromWriter;
        private final Thread hook;
        private boolean closed;

        private Writer(int index, Process process) {
            this.index = index;
            this.process = process;
            this.toWriter = new PrintWriter(new OutputStreamWriter(process.getOutputStream(),
                    StandardCharsets.US_ASCII), true);
            this.fromWriter = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.US_ASCII));
            this.hook = Thread.ofPlatform().unstarted(process::destroyForcibly);
            Runtime.getRuntime().addShutdownHook(hook);
        }

        /** Starts writer {@code index} on {@code uri} and {@code lockFile} and waits until it has opened both. */
        static Writer start(int index, String uri, Path lockFile) {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            List<String> cmd = List.of(java, "--enable-native-access=ALL-UNNAMED", "-XX:+UseSerialGC", "-Xmx256m",
                    "-cp", System.getProperty("java.class.path"), ShmContentionWriter.class.getName(),
                    Integer.toString(index), uri, lockFile.toString());
            Process p;
            try {
                p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot start writer JVM " + cmd, e);
            }
            Writer w = new Writer(index, p);
            try {
                String ready = w.fromWriter.readLine();
                if (!"R".equals(ready)) {
                    throw new IllegalStateException("writer JVM " + index + " (pid " + p.pid() + ") did not open "
                            + uri + " and " + lockFile + ": it " + (ready == null ? "exited" : "answered '" + ready
                            + "'") + " (its stderr is above)");
                }
            } catch (IOException | RuntimeException e) {
                w.close();
                throw e instanceof IOException io ? new UncheckedIOException(io) : (RuntimeException) e;
            }
            return w;
        }

        void send(String line) {
            toWriter.println(line);
            if (toWriter.checkError()) {
                throw new IllegalStateException("the control pipe to writer JVM " + index + " (pid "
                        + process.pid() + ") broke (its stderr is above)");
            }
        }

        String answer() {
            try {
                String line = fromWriter.readLine();
                if (line == null || !line.startsWith("DONE ")) {
                    throw new IllegalStateException("writer JVM " + index + " (pid " + process.pid() + ") "
                            + (line == null ? "exited" : "answered '" + line + "'") + " mid-run (its stderr is above)");
                }
                return line;
            } catch (IOException e) {
                throw new UncheckedIOException("the control pipe from writer JVM " + index + " broke", e);
            }
        }

        /** Tells the writer to quit, waits up to 5 s, then kills it. Idempotent. */
        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            toWriter.println("Q");
            toWriter.close();
            try {
                if (!process.waitFor(QUIT_WAIT_MS, TimeUnit.MILLISECONDS)) {
                    System.err.println("writer JVM " + index + " (pid " + process.pid() + ") did not quit in "
                            + QUIT_WAIT_MS + " ms; killing it");
                    process.destroyForcibly().waitFor();
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            } finally {
                try {
                    Runtime.getRuntime().removeShutdownHook(hook);
                } catch (IllegalStateException shuttingDown) {
                    // The hook is running or about to: it kills the process anyway.
                }
            }
        }
    }
}
