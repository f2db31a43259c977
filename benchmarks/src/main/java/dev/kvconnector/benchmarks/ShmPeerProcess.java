package dev.kvconnector.benchmarks;

import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A second JVM that drop-selects what this one puts: the other end of {@link ShmCrossProcessBenchmark}, reusable by
 * any benchmark that needs a peer process on a {@code shm:} store.
 *
 * <p>The peer is started with this JVM's own {@code java} and class path (the benchmarks jar) and
 * {@code --enable-native-access=ALL-UNNAMED} (and a serial collector with a 256 MiB heap: it allocates nothing per
 * operation, so a small JVM leaves the CPUs to the copies). It opens the same store URI and obeys one-byte commands
 * on its stdin, answering each with one byte on its stdout. A pipe keeps the control channel free of busy waiting,
 * which on a small shared machine would steal the CPU the copies need, and of any allocation on either side:
 * <ul>
 *   <li>{@code D}: drop-select: {@code getInto} the key into the peer's own native segment, then {@code remove} it;
 *       answers {@code K} when the whole value was there, {@code M} otherwise;</li>
 *   <li>{@code V}: the same, and the bytes are compared with the reference fill ({@link LayerShape#randomSegment});
 *       answers {@code K} only when every byte matches;</li>
 *   <li>{@code P}: nothing but the answer {@code K}: the control channel's own round trip;</li>
 *   <li>{@code Q}, or the end of stdin: close the store and exit.</li>
 * </ul>
 * The peer writes {@code R} once it is ready, and on exit one line to stderr with the heap bytes its serving thread
 * allocated per drop-select after its first 1000 (measured with {@code ThreadMXBean}; JMH's {@code -prof gc} sees
 * only its own JVM).
 *
 * <p>No orphan is left behind: {@link #close} (called from the benchmark's trial teardown) asks the peer to quit and
 * kills it if it does not within 5 s; a shutdown hook does the same if the benchmark JVM exits without tearing
 * down; and if this JVM is killed outright, the peer sees the end of its stdin and exits by itself.
 */
final class ShmPeerProcess implements AutoCloseable {
    private static final long QUIT_WAIT_MS = 5_000;
    /** Drop-selects the peer serves before it starts counting its allocation (its JIT warmup). */
    private static final long WARM_DROPS = 1_000;

    private final Process process;
    private final InputStream fromPeer;
    private final OutputStream toPeer;
    private final Thread hook;
    private final String uri;
    private boolean closed;

    private ShmPeerProcess(Process process, String uri) {
        this.process = process;
        this.uri = uri;
        this.fromPeer = process.getInputStream();
        this.toPeer = process.getOutputStream();
        this.hook = Thread.ofPlatform().unstarted(process::destroyForcibly);
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /**
     * Starts a peer JVM on {@code uri} that drop-selects values of {@code bytes} bytes under {@code key}, and waits
     * until it has opened the store.
     */
    static ShmPeerProcess start(String uri, String key, long bytes) {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = List.of(java, "--enable-native-access=ALL-UNNAMED", "-XX:+UseSerialGC", "-Xmx256m",
                "-cp", System.getProperty("java.class.path"), ShmPeerProcess.class.getName(), uri, key,
                Long.toString(bytes));
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start the peer JVM " + cmd, e);
        }
        ShmPeerProcess peer = new ShmPeerProcess(p, uri);
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
            toPeer.write('Q');
            toPeer.close();
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
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // The hook is running or about to: it kills the process anyway.
            }
        }
    }

    /** The peer's entry point: {@code URI KEY BYTES}. */
    public static void main(String[] args) throws IOException {
        String uri = args[0];
        String key = args[1];
        long bytes = Long.parseLong(args[2]);
        InputStream in = System.in;
        OutputStream out = new FileOutputStream(FileDescriptor.out);
        var threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long drops = 0;
        long allocatedBefore = 0;
        try (Arena arena = Arena.ofConfined(); KVStore kv = KVStores.open(uri)) {
            MemorySegment dst = arena.allocate(bytes, LayerShape.ALIGNMENT);
            MemorySegment expected = LayerShape.randomSegment(arena, bytes);
            out.write('R');
            out.flush();
            for (int c = in.read(); c >= 0 && c != 'Q'; c = in.read()) {
                int answer = switch (c) {
                    case 'P' -> 'K';
                    case 'D', 'V' -> {
                        if (drops++ == WARM_DROPS) {
                            allocatedBefore = threads.getCurrentThreadAllocatedBytes();
                        }
                        long r = kv.getInto(key, dst);
                        kv.remove(key);
                        boolean ok = r == bytes && (c == 'D' || dst.mismatch(expected) == -1);
                        if (!ok) {
                            System.err.println("peer: drop-select of " + key + " from " + uri + " got "
                                    + GetResult.describe(r) + (r == bytes ? " with wrong bytes" : "") + " for "
                                    + bytes + " bytes");
                        }
                        yield ok ? 'K' : 'M';
                    }
                    default -> throw new IllegalArgumentException("peer: unknown command " + c);
                };
                out.write(answer);
                out.flush();
            }
            if (drops > WARM_DROPS) {
                long allocated = threads.getCurrentThreadAllocatedBytes() - allocatedBefore;
                System.err.printf("peer: %d drop-selects of %d bytes; after the first %d, %d heap bytes allocated "
                        + "(%.3f B/op)%n", drops, bytes, WARM_DROPS, allocated,
                        allocated / (double) (drops - WARM_DROPS));
            }
        }
    }
}
