package dev.kvconnector.benchmarks;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.mooncake.p2p.P2pDropSession;
import dev.kvconnector.mooncake.p2p.TransferEngineConnector;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The goal: per layer between two processes on loopback TCP, a request's KV peer to peer through
 * {@link TransferEngineConnector} beside the raw socket floor measured in the same run. This JVM is P; D is a second
 * JVM ({@link Decoder}) with its paged cache registered. One invocation is one whole request of
 * {@value #LAYERS} layers (Llama-3-8B, 4 MiB a layer at 1024 tokens), from P reading D's
 * {@code kv_transfer_params} to D having accepted every layer by its word sum and P's commit, so the score is per
 * layer. P gathers each layer from its own cache through a shuffled block table, as an engine does; D's blocks are
 * shuffled too. The floor is {@link TransferEngineBenchmark#socketSendWithAck}'s: one layer over a loopback socket
 * to a thread of this JVM, then a 1-byte ack. The engine library is {@link TransferEngineBenchmark#uri()}'s.
 *
 * <p>What the P2P row carries beyond the floor: P's gather into registered staging (the sum fused into the copy),
 * D's word sum over the landed bytes, one notification per layer, and per request D's params and result over the
 * peer JVM's pipes (tens of microseconds, spread over the layers).
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class P2pConnectorBenchmark {
    /** Layers of one request, which {@link OperationsPerInvocation} divides by: Llama-3-8B's. */
    static final int LAYERS = 32;

    /** P's connector and cache, D's JVM, and the socket floor's peer. */
    @State(Scope.Thread)
    public static class Link {
        /** Model preset; it must have {@value #LAYERS} layers. */
        @Param({"llama3-8b"})
        public String model;
        /** Prompt tokens (Llama-3-8B at 1024 tokens: 4 MiB a layer). */
        @Param({"1024"})
        public int tokens;
        /**
         * D's block table: {@code shuffled} (a running engine's: one WRITE per block and tensor) or {@code contiguous}
         * (one WRITE per tensor), which tells the cost per WRITE request from the cost per byte.
         */
        @Param({"shuffled", "contiguous"})
        public String dBlocks;

        KVLayout layout;
        TransferEngineConnector p;
        PagedKVCache source;
        BlockTable table;
        RequestTokens request;
        TransferEngineBenchmark.Peer d;
        BufferedReader fromD;
        Arena arena;
        LoopbackPeer ackPeer;
        ByteBuffer layerBuffer;
        ByteBuffer one;
        long transfers;

        /** Starts D's JVM and P's connector; fills P's cache. */
        @Setup(Level.Trial)
        public void setUp() {
            layout = KVLayout.preset(model);
            if (layout.numLayers() != LAYERS) {
                throw new IllegalArgumentException(model + " has " + layout.numLayers() + " layers; this benchmark "
                        + "divides by " + LAYERS);
            }
            int blocks = blocks(layout, tokens);
            SplittableRandom r = new SplittableRandom(18);
            source = PagedWorkload.randomCache(layout, 2 * blocks, r);
            table = new BlockTable(PagedWorkload.shuffledBlocks(2 * blocks, blocks, r), layout.blockSize(), tokens);
            request = RequestTokens.of(new int[tokens]);
            String uri = TransferEngineBenchmark.uri();
            Process process = TransferEngineBenchmark.Peer.launch(Decoder.class, uri, model, Integer.toString(tokens),
                    dBlocks);
            fromD = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
            String[] ready = TransferEngineBenchmark.Peer.ready(process, fromD);
            d = TransferEngineBenchmark.Peer.adopt(process, ready[1], 0);
            p = TransferEngineConnector.builder(uri, layout).stagingBytes(2 * layout.layerBytes(tokens) * LAYERS)
                    .build();
            arena = Arena.ofShared();
            MemorySegment layer = LayerShape.randomSegment(arena, layout.layerBytes(tokens));
            layerBuffer = layer.asByteBuffer();
            one = arena.allocate(1).asByteBuffer();
            ackPeer = new LoopbackPeer(LoopbackPeer.Reply.ACK, layer.byteSize());
        }

        /** Closes P, D's JVM and the floor's peer. */
        @TearDown(Level.Trial)
        public void tearDown() {
            ackPeer.close();
            p.close();
            d.close();
            source.close();
            arena.close();
        }

        /** One request: D's params, every layer written, P's commit, D's verdict. */
        int transfer() {
            try {
                String params = fromD.readLine();
                if (params == null || !params.startsWith("PARAMS ")) {
                    throw new IllegalStateException("D did not publish its kv_transfer_params: it printed " + params);
                }
                KVTransferParams dest = KVTransferParams.fromJson(params.substring("PARAMS ".length()));
                String tid = p.acceptDestination(dest).transferId();
                try (InsertSession insert = p.beginInsert(request.inNamespace(tid))) {
                    for (int l = 0; l < LAYERS; l++) {
                        insert.putLayer(l, source, table);
                    }
                    insert.commit();
                }
                String verdict = fromD.readLine();
                if (!"HIT".equals(verdict)) {
                    throw new IllegalStateException("D did not accept transfer " + tid + ": " + verdict);
                }
                transfers++;
                return verdict.length();
            } catch (IOException e) {
                throw new UncheckedIOException("lost D's JVM", e);
            }
        }
    }

    static int blocks(KVLayout layout, int tokens) {
        return (tokens + layout.blockSize() - 1) / layout.blockSize();
    }

    /** A whole request peer to peer into D's JVM, per layer. */
    @Benchmark
    @OperationsPerInvocation(LAYERS)
    public int p2pLayer(Link l) {
        return l.transfer();
    }

    /** The floor, measured in this run: one layer over a loopback socket, then a 1-byte ack. */
    @Benchmark
    public int socketSendWithAck(Link l) throws IOException {
        SocketChannel c = l.ackPeer.client();
        LoopbackPeer.writeFully(c, l.layerBuffer.clear());
        LoopbackPeer.readFully(c, l.one.clear(), 1);
        return l.one.get(0);
    }

    /**
     * D, in the second JVM: a connector with a registered cache of twice the request's blocks, the request's blocks
     * shuffled or the first ones in order (the fourth argument). Prints
     * {@code READY <segment>}, then per request {@code PARAMS <kv_transfer_params>} at once and {@code HIT} (or the
     * miss) once every layer has landed and P has committed; it exits when its stdin ends.
     */
    public static final class Decoder {
        private Decoder() {
        }

        public static void main(String[] args) {
            KVLayout layout = KVLayout.preset(args[1]);
            int tokens = Integer.parseInt(args[2]);
            int blocks = blocks(layout, tokens);
            Thread.ofPlatform().daemon().start(() -> {
                try {
                    while (System.in.read() >= 0) {
                        // Only the end of stdin matters: P is done.
                    }
                } catch (IOException ignored) {
                    // The same: P is gone.
                }
                System.exit(0);
            });
            try (PagedKVCache cache = PagedKVCache.allocate(layout, 2 * blocks);
                 TransferEngineConnector d = TransferEngineConnector.builder(args[0], layout).registerCache(cache)
                         .stagingBytes(1L << 20).build()) {
                int[] ids = "contiguous".equals(args[3]) ? IntStream.range(0, blocks).toArray()
                        : PagedWorkload.shuffledBlocks(2 * blocks, blocks, new SplittableRandom(19));
                BlockTable table = new BlockTable(ids, layout.blockSize(), tokens);
                RequestTokens request = RequestTokens.of(new int[tokens]);
                System.out.println("READY " + d.engine().segmentName());
                for (long i = 0; ; i++) {
                    try (P2pDropSession drop = d.beginDropSelect(request.inNamespace("bench-p2p-" + i),
                            DropTarget.paged(cache, table))) {
                        System.out.println("PARAMS " + drop.transferParams().toJson());
                        System.out.flush();
                        for (int l = 0; l < layout.numLayers() && drop.awaitLayer(l); l++) {
                            // Each layer is checked by its word sum as it lands.
                        }
                        DropResult r = drop.result();
                        System.out.println(r.isComplete() ? "HIT" : "MISS " + r);
                        System.out.flush();
                    }
                }
            }
        }
    }
}
