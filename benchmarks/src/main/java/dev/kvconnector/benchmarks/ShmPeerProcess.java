package dev.kvconnector.benchmarks;

import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreView;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A second JVM that drop-selects what this one puts: the other end of {@link ShmCrossProcessBenchmark}, reusable by
 * any benchmark that needs a peer process on a {@code shm:} store.
 *
 * <p>The peer is started with this JVM's own {@code java} and class path (the benchmarks jar) and
 * {@code --enable-native-access=ALL-UNNAMED} (and a serial collector with a 256 MiB heap: it allocates nothing per
 * operation, so a small JVM leaves the CPUs to the copies). It opens the same store URI and obeys one-byte commands,
 * answering each with one byte:
 * <ul>
 *   <li>{@code D}: drop-select: {@code getInto} the key into the peer's own native segment, then {@code remove} it;
 *       answers {@code K} when the whole value was there, {@code M} otherwise;</li>
 *   <li>{@code V}: the same, and the bytes are compared with the reference fill ({@link LayerShape#randomSegment});
 *       answers {@code K} only when every byte matches;</li>
 *   <li>{@code S}: drop-select in place: {@code tryView} the key, copy the viewed bytes into the peer's own segment
 *       (the scatter a consumer makes), release the view, then {@code remove} the key; answers as {@code D} does
 *       (needs a store with {@link StoreCapability#VIEW});</li>
 *   <li>{@code W}: the same, and the bytes are compared with the reference fill, as {@code V} does;</li>
 *   <li>{@code P}: nothing but the answer {@code K}: the control channel's own round trip;</li>
 *   <li>{@code Q}: close the store and exit.</li>
 * </ul>
 * The commands travel one of two ways ({@link Signal}), both free of allocation on either side:
 * <ul>
 *   <li>{@link Signal#SPIN}: two words in a small shared file, each side spinning on the other's word, as the
 *       producer and consumer threads of the two-core floor do. The hand-over is then the store's work and the
 *       copies alone: this is what the goal is judged on.</li>
 *   <li>{@link Signal#PIPE}: the peer's stdin and stdout, each side blocked in {@code read}. Every command then
 *       wakes a process from sleep, which on this project's 2-vCPU VM costs a hypervisor wake-up of an idle vCPU:
 *       shown beside the goal, to say what an engine that sleeps between requests pays on top.</li>
 * </ul>
 * The peer writes {@code R} on its stdout once it is ready, and on exit one line to stderr with the heap bytes its
 * serving thread allocated per drop-select (of either kind) after its first 1000 (measured with
 * {@code ThreadMXBean}; JMH's {@code -prof gc} sees only its own JVM).
 *
 * <p>No orphan is left behind: {@link #close} (called from the benchmark's trial teardown) asks the peer to quit and
 * kills it if it does not within 5 s; a shutdown hook does the same if the benchmark JVM exits without tearing
 * down; and if this JVM is killed outright, the peer sees the end of its stdin and exits by itself (in
 * {@link Signal#SPIN} mode a daemon thread of the peer waits for that end).
 */
final class ShmPeerProcess implements AutoCloseable {
    private static final long QUIT_WAIT_MS = 5_000;
    /** Drop-selects the peer serves before it starts counting its allocation (its JIT warmup). */
    private static final long WARM_DROPS = 1_000;

    /** How commands reach the peer and answers come back. */
    enum Signal { SPIN, PIPE }

    private final Process process;
    private final InputStream fromPeer;
    private final OutputStream toPeer;
    private final SpinChannel spin;
    private final Thread hook;
    private final String uri;
    private boolean closed;

    private ShmPeerProcess(Process process, String uri, SpinChannel spin) {
        this.process = process;
        this.uri = uri;
        this.spin = spin;
        this.fromPeer = process.getInputStream();
        this.toPeer = process.getOutputStream();
        this.hook = Thread.ofPlatform().unstarted(process::destroyForcibly);
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /**
     * Starts a peer JVM on {@code uri} that drop-selects values of {@code bytes} bytes under {@code key}, commanded
     * through {@code signal}, and waits until it has opened the store.
     */
    static ShmPeerProcess start(String uri, String key, long bytes, Signal signal) {
        SpinChannel spin = signal == Signal.SPIN ? SpinChannel.create() : null;
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = List.of(java, "--enable-native-access=ALL-UNNAMED", "-XX:+UseSerialGC", "-Xmx256m",
                "-cp", System.getProperty("java.class.path"), ShmPeerProcess.class.getName(), uri, key,
                Long.toString(bytes), spin == null ? "-" : spin.file.toString());
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        } catch (IOException e) {
            if (spin != null) {
                spin.close();
            }
            throw new UncheckedIOException("cannot start the peer JVM " + cmd, e);
        }
        ShmPeerProcess peer = new ShmPeerProcess(p, uri, spin);
        try {
            int ready = peer.fromPeer.read();
            if (ready != 'R') {
                throw new IllegalStateException("the peer JVM (pid " + p.pid() + ") did not open " + uri + ": it "
                        + (ready < 0 ? "exited" : "answered '" + (char) ready + "'") + " (its stderr is above)");
            }
        } catch (IOException | RuntimeException e) {
            peer.close();
            throw e instanceof IOException io ? new UncheckedIOException(io) : (RuntimeException) e;
        }
        return peer;
    }

    /** Sends one command and returns the peer's one-byte answer; allocates nothing. */
    int call(int command) {
        if (spin != null) {
            return spin.call(command, process);
        }
        try {
            toPeer.write(command);
            toPeer.flush();
            int answer = fromPeer.read();
            if (answer < 0) {
                throw new IllegalStateException("the peer JVM (pid " + process.pid() + ") on " + uri
                        + " exited mid-command '" + (char) command + "' (its stderr is above)");
            }
            return answer;
        } catch (IOException e) {
            throw new UncheckedIOException("the control pipe to the peer JVM (pid " + process.pid() + ") broke", e);
        }
    }

    /** Tells the peer to quit, waits up to 5 s, then kills it. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            if (spin != null) {
                spin.send('Q');
            } else {
                toPeer.write('Q');
                toPeer.close();
            }
        } catch (IOException alreadyGone) {
            // The peer exited already; waiting below reaps it.
        }
        try {
            if (!process.waitFor(QUIT_WAIT_MS, TimeUnit.MILLISECONDS)) {
                System.err.println("peer JVM (pid " + process.pid() + ") did not quit in " + QUIT_WAIT_MS
                        + " ms; killing it");
                process.destroyForcibly().waitFor();
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        } finally {
            if (spin != null) {
                closeQuietly(toPeer);
                spin.close();
            }
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // The hook is running or about to: it kills the process anyway.
            }
        }
    }

    private static void closeQuietly(OutputStream toPeer) {
        try {
            toPeer.close();
        } catch (IOException alreadyGone) {
            // The peer has exited: nothing reads its stdin any more.
        }
    }

    /**
     * The {@link Signal#SPIN} channel: a 4 KiB file in {@code /dev/shm} (mode 0600) mapped by both JVMs, with a
     * command word and an answer word on separate cache lines. A word holds a sequence number and the command or
     * answer byte; each side spins on the other's word until its sequence number arrives.
     */
    private static final class SpinChannel implements AutoCloseable {
        private static final VarHandle WORD = ValueLayout.JAVA_LONG.varHandle();
        private static final long COMMAND = 0;
        private static final long ANSWER = 128;
        private static final long SIZE = 4096;
        /** Spins between checks that the other side is still alive. */
        private static final long SPINS_PER_CHECK = 1L << 20;

        final Path file;
        private final Arena arena;
        private final MemorySegment words;
        private long sequence;

        private SpinChannel(Path file, Arena arena, MemorySegment words) {
            this.file = file;
            this.arena = arena;
            this.words = words;
        }

        static SpinChannel create() {
            Path file = Path.of("/dev/shm", "kvc-xproc-signal-" + ProcessHandle.current().pid() + "-"
                    + System.nanoTime());
            try {
                Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString(
                        "rw-------")));
                return open(file);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot create the peer's signal file " + file, e);
            }
        }

        static SpinChannel open(Path file) throws IOException {
            Arena arena = Arena.ofShared();
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                if (ch.size() < SIZE) {
                    ch.write(ByteBuffer.allocate(1), SIZE - 1);
                }
                return new SpinChannel(file, arena, ch.map(FileChannel.MapMode.READ_WRITE, 0, SIZE, arena));
            } catch (IOException | RuntimeException e) {
                arena.close();
                throw e;
            }
        }

        void send(int command) {
            WORD.setRelease(words, COMMAND, ++sequence << 8 | command);
        }

        int call(int command, Process peer) {
            send(command);
            for (long spins = 1; ; spins++) {
                long answer = (long) WORD.getAcquire(words, ANSWER);
                if (answer >>> 8 == sequence) {
                    return (int) (answer & 0xFF);
                }
                Thread.onSpinWait();
                if (spins % SPINS_PER_CHECK == 0 && !peer.isAlive()) {
                    throw new IllegalStateException("the peer JVM (pid " + peer.pid() + ") exited mid-command '"
                            + (char) command + "' (its stderr is above)");
                }
            }
        }

        /** The peer's side: spins until the next command arrives and returns it. */
        int next() {
            long expected = sequence + 1;
            while (true) {
                long command = (long) WORD.getAcquire(words, COMMAND);
                if (command >>> 8 == expected) {
                    sequence = expected;
                    return (int) (command & 0xFF);
                }
                Thread.onSpinWait();
            }
        }

        void answer(int answer) {
            WORD.setRelease(words, ANSWER, sequence << 8 | answer);
        }

        @Override
        public void close() {
            arena.close();
            try {
                Files.deleteIfExists(file);
            } catch (IOException e) {
                System.err.println("cannot remove the peer's signal file " + file + ": " + e);
            }
        }
    }

    /**
     * Views {@code key} and copies the viewed bytes into {@code dst}: the value's length, or a {@link GetResult} code
     * (a miss, or a destination too small, which copies nothing).
     */
    private static long viewInto(KVStore kv, StoreView view, String key, MemorySegment dst) {
        if (view == null) {
            throw new IllegalStateException("peer: " + kv.uri() + " cannot view in place (no VIEW capability)");
        }
        long r = kv.tryView(key, view);
        if (GetResult.isHit(r)) {
            try {
                if (r <= dst.byteSize()) {
                    MemorySegment.copy(view.segment(), 0, dst, 0, r);
                } else {
                    r = GetResult.tooSmall(r);
                }
            } finally {
                view.release();
            }
        }
        return r;
    }

    /** The peer's entry point: {@code URI KEY BYTES SIGNAL-FILE}, the last {@code -} for the pipe. */
    public static void main(String[] args) throws IOException {
        String uri = args[0];
        String key = args[1];
        long bytes = Long.parseLong(args[2]);
        InputStream in = System.in;
        OutputStream out = new FileOutputStream(FileDescriptor.out);
        SpinChannel spin = args[3].equals("-") ? null : SpinChannel.open(Path.of(args[3]));
        if (spin != null) {
            Thread.ofPlatform().daemon().name("peer-stdin-watch").start(() -> {
                try {
                    while (in.read() >= 0) {
                        // Only the end of stdin matters: the benchmark JVM has gone.
                    }
                } catch (IOException gone) {
                    // The same: the benchmark JVM has gone.
                }
                Runtime.getRuntime().halt(0);
            });
        }
        var threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long drops = 0;
        long allocatedBefore = 0;
        try (Arena arena = Arena.ofConfined(); KVStore kv = KVStores.open(uri)) {
            MemorySegment dst = arena.allocate(bytes, LayerShape.ALIGNMENT);
            MemorySegment expected = LayerShape.randomSegment(arena, bytes);
            StoreView view = kv.capabilities().contains(StoreCapability.VIEW) ? kv.newView() : null;
            out.write('R');
            out.flush();
            for (int c = spin != null ? spin.next() : in.read(); c >= 0 && c != 'Q';
                    c = spin != null ? spin.next() : in.read()) {
                int answer = switch (c) {
                    case 'P' -> 'K';
                    case 'D', 'V', 'S', 'W' -> {
                        if (drops++ == WARM_DROPS) {
                            allocatedBefore = threads.getCurrentThreadAllocatedBytes();
                        }
                        long r = c == 'D' || c == 'V' ? kv.getInto(key, dst) : viewInto(kv, view, key, dst);
                        kv.remove(key);
                        boolean ok = r == bytes && ((c == 'D' || c == 'S') || dst.mismatch(expected) == -1);
                        if (!ok) {
                            System.err.println("peer: drop-select of " + key + " from " + uri + " got "
                                    + GetResult.describe(r) + (r == bytes ? " with wrong bytes" : "") + " for "
                                    + bytes + " bytes");
                        }
                        yield ok ? 'K' : 'M';
                    }
                    default -> throw new IllegalArgumentException("peer: unknown command " + c);
                };
                if (spin != null) {
                    spin.answer(answer);
                } else {
                    out.write(answer);
                    out.flush();
                }
            }
            if (drops > WARM_DROPS) {
                long allocated = threads.getCurrentThreadAllocatedBytes() - allocatedBefore;
                System.err.printf("peer (%s): %d drop-selects of %d bytes; after the first %d, %d heap bytes "
                        + "allocated (%.3f B/op)%n", spin != null ? "spinning" : "woken by pipe", drops, bytes,
                        WARM_DROPS, allocated, allocated / (double) (drops - WARM_DROPS));
            }
        } finally {
            if (spin != null) {
                spin.arena.close();
            }
        }
    }
}
