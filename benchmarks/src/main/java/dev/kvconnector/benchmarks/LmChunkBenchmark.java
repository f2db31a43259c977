package dev.kvconnector.benchmarks;

import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.lmcache.client.LmStore;
import dev.kvconnector.lmcache.format.LmChunkFormat;
import dev.kvconnector.lmcache.format.LmChunkGeometry;
import dev.kvconnector.lmcache.format.LmRemoteMetadata;
import dev.kvconnector.lmcache.key.LmcacheV1Keys;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStores;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
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
 * A request's KV as LMCache chunk objects over {@code lm://} against the Java LMCache server
 * ({@link LmServerFixture}, protocol v1): the request's {@code tokens} are cut into LMCache's 256-token chunks,
 * each one object of every layer in the v1 chunk layout ({@code KV_2LTD}, or {@code KV_MLA_FMT} for MLA) with its
 * RemoteMetadata in the protocol header, under a v1 key. {@link #put} stores every chunk (PUT, then the store's
 * confirming EXIST) and {@link #getInto} reads every chunk with its metadata, one chunk after the other as
 * LMCache's lm connector does. The report divides by the layer count and compares with the raw socket floor of one
 * layer at the same model and tokens, measured in the same run ({@link SocketBaseline}).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class LmChunkBenchmark {
    /** LMCache's default chunk size, in tokens. */
    static final int CHUNK_TOKENS = 256;

    /** Model preset whose request is moved. */
    @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
    public String model;
    /** Prompt tokens. */
    @Param({"256", "1024", "4096"})
    public int tokens;

    private LmServerFixture server;
    private LmStore store;
    private Arena arena;
    private String[] keys;
    private MemorySegment[] src;
    private MemorySegment[] dst;
    private LmObjectMeta[] meta;
    private final LmReplyHeader reply = new LmReplyHeader();

    /** Starts the server, cuts the request into chunks and stores them once, so that {@link #getInto} always hits. */
    @Setup(Level.Trial)
    public void setUp() {
        KVLayout layout = KVLayout.preset(model);
        LmChunkFormat format = layout.kind() == AttentionKind.MLA ? LmChunkFormat.V1_KV_MLA
                : LmChunkFormat.V1_KV_2LTD;
        int chunks = (tokens + CHUNK_TOKENS - 1) / CHUNK_TOKENS;
        server = LmServerFixture.start();
        store = (LmStore) KVStores.open("lm://" + server.hostPort() + "?protocol=v1&timeout=30s");
        arena = Arena.ofShared();
        keys = new String[chunks];
        src = new MemorySegment[chunks];
        dst = new MemorySegment[chunks];
        meta = new LmObjectMeta[chunks];
        for (int c = 0; c < chunks; c++) {
            int t = Math.min(CHUNK_TOKENS, tokens - c * CHUNK_TOKENS);
            LmChunkGeometry g = new LmChunkGeometry(layout.numLayers(), t, layout.kvHeads(), layout.headSize(),
                    layout.dtype().byteWidth());
            long bytes = format.chunkBytes(g);
            long[] shape = format.shape(g);
            keys[c] = LmcacheV1Keys.chunkKey(model, 1, 0, String.format("%064x", c),
                    layout.dtype(), null);
            meta[c] = new LmObjectMeta(format.memoryFormat(), LmRemoteMetadata.dtypeCode(layout.dtype()),
                    (int) shape[0], (int) shape[1], (int) shape[2], (int) shape[3]);
            src[c] = LayerShape.randomSegment(arena, bytes);
            dst[c] = arena.allocate(bytes, LayerShape.ALIGNMENT);
            store.put(keys[c], src[c], meta[c]);
            long r = store.getInto(keys[c], dst[c], reply);
            if (r != bytes || src[c].mismatch(dst[c]) != -1 || !reply.meta().equals(meta[c])) {
                throw new IllegalStateException("lm://" + server.hostPort() + " did not return chunk " + c + ": "
                        + GetResult.describe(r) + " for " + bytes + " bytes, metadata " + reply.meta());
            }
        }
    }

    /** Closes the store and stops the server. */
    @TearDown(Level.Trial)
    public void tearDown() {
        try {
            store.close();
        } finally {
            server.close();
            arena.close();
        }
    }

    /** Stores every chunk of the request, each with its v1 metadata; the result is the chunk count. */
    @Benchmark
    public int put() {
        for (int c = 0; c < keys.length; c++) {
            store.put(keys[c], src[c], meta[c]);
        }
        return keys.length;
    }

    /** Reads every chunk of the request and its metadata; the result is the bytes read. */
    @Benchmark
    public long getInto() {
        long total = 0;
        for (int c = 0; c < keys.length; c++) {
            total += store.getInto(keys[c], dst[c], reply);
        }
        return total;
    }
}
