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
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
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
 * A request's KV as LMCache chunk objects over each store that holds LMCache's layouts ({@link #lmStore}):
 * {@code lm://} against the Java LMCache server ({@link LmServerFixture}, protocol v1), {@code lmcache+valkey://}
 * against a fresh redis-server, and {@code lmcache+mooncake://} over the Mooncake store test double. The request's
 * {@code tokens} are cut into LMCache's 256-token chunks, each one object of every layer in the v1 chunk layout
 * ({@code KV_2LTD}, or {@code KV_MLA_FMT} for MLA) under a v1 key. Over {@code lm://} the RemoteMetadata travels in
 * the protocol header (PUT, then the store's confirming EXIST); over the {@code lmcache+} stores it is the object's
 * first 28 bytes, written as LMCache writes them ({@code kv_bytes} and {@code metadata} keys on Valkey, one object on
 * Mooncake). {@link #put} stores every chunk and {@link #getInto} reads every chunk with its metadata, one chunk
 * after the other as LMCache's remote connectors do. The report divides by the layer count and compares with the
 * floor of one layer at the same model and tokens, measured in the same run: the raw socket for the network stores,
 * memcpy for the in-process Mooncake double.
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
    /**
     * The store URI template ({@link StoreFixture}); not called {@code store}, so that {@code run.sh}'s store list for
     * the layer benchmarks does not replace these LMCache layouts.
     */
    @Param({"lm://{lmserver}", "lmcache+valkey://{redis}", "lmcache+mooncake://{mooncake-double}"})
    public String lmStore;

    private StoreFixture fixture;
    private KVStore store;
    private LmStore lm;
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
        fixture = StoreFixture.start(lmStore);
        String uri = fixture.uri().startsWith("lm://") ? fixture.uri() + "?protocol=v1&timeout=30s" : fixture.uri();
        store = KVStores.open(uri);
        lm = store instanceof LmStore s ? s : null;
        int header = lm == null ? LmRemoteMetadata.SINGLE_GROUP_BYTES : 0;
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
            src[c] = LayerShape.randomSegment(arena, header + bytes);
            dst[c] = arena.allocate(header + bytes, LayerShape.ALIGNMENT);
            if (lm == null) {
                LmRemoteMetadata.of((int) bytes, meta[c].fmt(), meta[c].dtype(), (int) shape[0], (int) shape[1],
                        (int) shape[2], (int) shape[3]).encode(src[c], 0);
            }
            putChunk(c);
            long r = getChunk(c);
            if (r != header + bytes || src[c].mismatch(dst[c]) != -1 || (lm != null && !reply.meta().equals(meta[c]))) {
                throw new IllegalStateException(store.uri() + " did not return chunk " + c + ": "
                        + GetResult.describe(r) + " for " + (header + bytes) + " bytes");
            }
        }
    }

    private void putChunk(int c) {
        if (lm != null) {
            lm.put(keys[c], src[c], meta[c]);
        } else {
            store.put(keys[c], src[c], PutOptions.DEFAULT);
        }
    }

    private long getChunk(int c) {
        return lm != null ? lm.getInto(keys[c], dst[c], reply) : store.getInto(keys[c], dst[c]);
    }

    /** Closes the store and stops what the fixture started. */
    @TearDown(Level.Trial)
    public void tearDown() {
        try {
            store.close();
        } finally {
            fixture.close();
            arena.close();
        }
    }

    /** Stores every chunk of the request, each with its v1 metadata; the result is the chunk count. */
    @Benchmark
    public int put() {
        for (int c = 0; c < keys.length; c++) {
            putChunk(c);
        }
        return keys.length;
    }

    /** Reads every chunk of the request and its metadata; the result is the bytes read. */
    @Benchmark
    public long getInto() {
        long total = 0;
        for (int c = 0; c < keys.length; c++) {
            total += getChunk(c);
        }
        return total;
    }
}
