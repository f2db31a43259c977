package dev.kvconnector.benchmarks;

import dev.kvconnector.mooncake.te.RemoteSegment;
import dev.kvconnector.mooncake.te.TransferBatch;
import dev.kvconnector.mooncake.te.TransferEngine;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * One layer peer to peer through Mooncake's Transfer Engine binding ({@link TransferEngine}) into, or out of, the
 * registered memory of a second JVM ({@link Peer}), one request per batch, beside the raw socket floor
 * ({@link LoopbackPeer}: send the layer and wait for a 1-byte ack; send 1 byte and receive the layer) measured in
 * the same run. The library is {@code MOONCAKE_TE_LIB} when set, else the test double
 * ({@code -Dkvc.mooncake.te.double}, default {@code native/target/lib/libmooncake_te_double.so}), whose transport is
 * loopback TCP.
 *
 * <p>Completion is polled ({@link TransferBatch#poll()}) with a 20 us park between polls, so the poller leaves the
 * CPUs to the engine's threads on a small machine.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class TransferEngineBenchmark {
    /** Nanoseconds the poller parks between polls. */
    static final long POLL_PARK_NS = 20_000;

    /** This JVM's engine, a peer JVM with one layer registered, and the socket floor's peer. */
    @State(Scope.Thread)
    public static class Link {
        /** Model preset whose layer is moved. */
        @Param({"llama3-8b"})
        public String model;
        /** Prompt tokens (Llama-3-8B at 1024 tokens: 4 MiB). */
        @Param({"1024"})
        public int tokens;
        /**
         * Where the receiving engine runs: {@code process} (a second JVM, the case the goal is judged on) or
         * {@code thread} (a second engine in this JVM, as the socket floor's peer is a thread of this JVM).
         */
        @Param({"process"})
        public String peerIn;

        Arena arena;
        MemorySegment layer;
        TransferEngine engine;
        Peer peer;
        RemoteSegment segment;
        TransferBatch batch;
        LoopbackPeer ackPeer;
        LoopbackPeer servePeer;
        ByteBuffer layerBuffer;
        ByteBuffer one;
        long bytes;

        /** Opens both engines and both socket peers. */
        @Setup(Level.Trial)
        public void setUp() {
            bytes = LayerShape.layerBytes(model, tokens);
            arena = Arena.ofShared();
            layer = LayerShape.randomSegment(arena, bytes);
            layerBuffer = layer.asByteBuffer();
            one = arena.allocate(1).asByteBuffer();
            String uri = uri();
            engine = TransferEngine.open(uri);
            engine.register(layer, "cpu:0");
            peer = "thread".equals(peerIn) ? Peer.inThisJvm(uri, bytes) : Peer.start(uri, bytes);
            segment = engine.openSegment(peer.segmentName);
            batch = engine.newBatch(1);
            ackPeer = new LoopbackPeer(LoopbackPeer.Reply.ACK, bytes);
            servePeer = new LoopbackPeer(LoopbackPeer.Reply.SERVE, bytes);
        }

        /** Closes everything it opened, the peer JVM included. */
        @TearDown(Level.Trial)
        public void tearDown() {
            ackPeer.close();
            servePeer.close();
            engine.close();
            peer.close();
            arena.close();
        }

        int move(boolean write) {
            if (write) {
                batch.write(layer, segment, peer.address, bytes);
            } else {
                batch.read(layer, segment, peer.address, bytes);
            }
            int rc = batch.submit();
            if (rc != 0) {
                throw batch.submitFailure(rc);
            }
            while ((rc = batch.poll()) == TransferBatch.IN_FLIGHT) {
                LockSupport.parkNanos(POLL_PARK_NS);
            }
            if (rc != TransferBatch.COMPLETED) {
                throw batch.failure();
            }
            batch.reset();
            return rc;
        }
    }

    static String uri() {
        String lib = System.getenv("MOONCAKE_TE_LIB");
        if (lib == null || lib.isBlank()) {
            Path dbl = Path.of(System.getProperty("kvc.mooncake.te.double",
                    "native/target/lib/libmooncake_te_double.so")).toAbsolutePath();
            if (!Files.exists(dbl)) {
                throw new IllegalStateException("the transfer engine test double is not built at " + dbl
                        + " (build the native module with cmake and gcc, or set -Dkvc.mooncake.te.double or "
                        + "MOONCAKE_TE_LIB)");
            }
            lib = dbl.toString();
        }
        return "mooncake-te://127.0.0.1?protocol=tcp&metadata=P2PHANDSHAKE&library=" + lib;
    }

    /** WRITE of one layer into the peer JVM's registered memory, until COMPLETED. */
    @Benchmark
    public int write(Link l) {
        return l.move(true);
    }

    /** READ of one layer out of the peer JVM's registered memory, until COMPLETED. */
    @Benchmark
    public int read(Link l) {
        return l.move(false);
    }

    /** The floor of {@link #write}: the layer over a loopback socket, then a 1-byte ack. */
    @Benchmark
    public int socketSendWithAck(Link l) throws IOException {
        SocketChannel c = l.ackPeer.client();
        LoopbackPeer.writeFully(c, l.layerBuffer.clear());
        LoopbackPeer.readFully(c, l.one.clear(), 1);
        return l.one.get(0);
    }

    /** The floor of {@link #read}: a 1-byte request, then the layer over a loopback socket. */
    @Benchmark
    public int socketFetch(Link l) throws IOException {
        SocketChannel c = l.servePeer.client();
        LoopbackPeer.writeFully(c, l.one.clear());
        LoopbackPeer.readFully(c, l.layerBuffer.clear(), l.bytes);
        return l.layerBuffer.get(0);
    }

    /**
     * The peer JVM: opens an engine on the same URI, registers {@code bytes} bytes, prints
     * {@code READY <segment name> <address>} and serves until its stdin ends.
     */
    static final class Peer implements AutoCloseable {
        final Process process;
        final String segmentName;
        final long address;
        private final Thread hook;
        private final TransferEngine localEngine;
        private final Arena localArena;

        private Peer(Process process, String segmentName, long address) {
            this.process = process;
            this.segmentName = segmentName;
            this.address = address;
            this.hook = Thread.ofPlatform().unstarted(process::destroyForcibly);
            this.localEngine = null;
            this.localArena = null;
            Runtime.getRuntime().addShutdownHook(hook);
        }

        private Peer(TransferEngine engine, Arena arena, long address) {
            this.process = null;
            this.hook = null;
            this.segmentName = engine.segmentName();
            this.address = address;
            this.localEngine = engine;
            this.localArena = arena;
        }

        /** A second engine in this JVM with {@code bytes} registered. */
        static Peer inThisJvm(String uri, long bytes) {
            TransferEngine engine = TransferEngine.open(uri);
            Arena arena = Arena.ofShared();
            MemorySegment memory = arena.allocate(bytes, LayerShape.ALIGNMENT);
            engine.register(memory, "cpu:0");
            return new Peer(engine, arena, memory.address());
        }

        static Peer start(String uri, long bytes) {
            Process p = launch(Peer.class, uri, Long.toString(bytes));
            String[] parts = ready(p, new BufferedReader(new InputStreamReader(p.getInputStream(),
                    StandardCharsets.UTF_8)));
            return new Peer(p, parts[1], Long.parseLong(parts[2]));
        }

        /** A peer JVM started with {@link #launch} that has printed its {@link #ready} line. */
        static Peer adopt(Process p, String segmentName, long address) {
            return new Peer(p, segmentName, address);
        }

        /** Starts {@code main} in a second JVM on this class path, stderr inherited. */
        static Process launch(Class<?> main, String... args) {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            List<String> cmd = new java.util.ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED",
                    "-XX:+UseSerialGC", "-Xmx128m", "-cp", System.getProperty("java.class.path"), main.getName()));
            cmd.addAll(List.of(args));
            try {
                return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot start the peer JVM " + cmd, e);
            }
        }

        /** Reads the peer's first line, {@code READY ...}, split at spaces; kills the peer when it is not that. */
        static String[] ready(Process p, BufferedReader out) {
            try {
                String line = out.readLine();
                if (line == null || !line.startsWith("READY ")) {
                    p.destroyForcibly();
                    throw new IllegalStateException("the peer JVM did not start its engine: it printed " + line);
                }
                return line.split(" ");
            } catch (IOException e) {
                p.destroyForcibly();
                throw new UncheckedIOException("cannot read the peer JVM's first line", e);
            }
        }

        /** Ends the peer (its stdin closes) and waits for it, killing it after 10 s. */
        @Override
        public void close() {
            if (localEngine != null) {
                localEngine.close();
                localArena.close();
                return;
            }
            try {
                process.getOutputStream().close();
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor();
                }
            } catch (IOException | InterruptedException e) {
                process.destroyForcibly();
            } finally {
                try {
                    Runtime.getRuntime().removeShutdownHook(hook);
                } catch (IllegalStateException shuttingDown) {
                    // The hook kills the process anyway.
                }
            }
        }

        public static void main(String[] args) throws IOException {
            try (TransferEngine engine = TransferEngine.open(args[0]); Arena arena = Arena.ofShared()) {
                MemorySegment memory = arena.allocate(Long.parseLong(args[1]), LayerShape.ALIGNMENT);
                engine.register(memory, "cpu:0");
                System.out.println("READY " + engine.segmentName() + " " + memory.address());
                System.out.flush();
                while (System.in.read() >= 0) {
                    // Serving happens on the engine's threads; this one only waits for the end of stdin.
                }
            }
        }
    }
}
