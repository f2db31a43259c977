package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventBatch;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What the kv-aware policy adds to a request (issue 20's goal: at most 100 us at p50 with 10,000 chunks indexed):
 * hashing the prompt's tokens into its {@code kvc-v1} chunk hashes, matching them against the {@link PrefixIndex},
 * and picking the prefill instance by {@code 2 * overlap - load} among 8.
 *
 * <p>The index holds 10,000 chunks of 256 tokens: prompts of {@code promptTokens} tokens, each stored in the cache of
 * one of the 8 prefill engines and, for half of them, in the shared store. {@link #routeHit} routes one of those
 * prompts, {@link #routeMiss} a prompt nobody holds (every chunk hashed, the walk stops at the first). It lives in
 * the proxy's package, in this module, because the index and the router are package-private to the proxy.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class KvRoutingBenchmark {
    private static final int CHUNK = 256;
    private static final int INDEXED_CHUNKS = 10_000;
    private static final int ENGINES = 8;

    /** Tokens per prompt: 2 or 16 chunks. */
    @Param({"512", "4096"})
    public int promptTokens;

    private KvRouter router;
    private InstanceSelector selector;
    private List<Instance> prefill;
    private ObjectNode[] hits;
    private ObjectNode miss;
    private int next;

    /** Fills the index with 10,000 chunks from scripted event streams. */
    @Setup(Level.Trial)
    public void setUp() {
        router = new KvRouter(KvTokenizer.BYTES);
        selector = InstanceSelector.of(Policy.KV_AWARE, router);
        byte[] root = new byte[32];
        new Random(1).nextBytes(root);
        String rootHex = HexFormat.of().formatHex(root);
        prefill = new ArrayList<>();
        List<KvEventFeed> feeds = new ArrayList<>();
        for (int e = 0; e < ENGINES; e++) {
            Instance i = new Instance(Role.PREFILL, HostPort.parse("10.0.0." + (e + 1) + ":8100"));
            prefill.add(i);
            feeds.add(router.feed(i.name, null));
        }
        ObjectMapper json = new ObjectMapper();
        int prompts = INDEXED_CHUNKS / (promptTokens / CHUNK);
        hits = new ObjectNode[prompts];
        Random random = new Random(2);
        long[] seq = new long[ENGINES];
        for (int p = 0; p < prompts; p++) {
            String text = text(random, promptTokens);
            hits[p] = json.createObjectNode().put("prompt", text);
            List<KvEvent> events = new ArrayList<>();
            int engine = p % ENGINES;
            for (ChunkKeys c : KvcV1KeyScheme.planFromRoot(root, CHUNK, 0, RequestTokens.of(bytes(text))).chunks()) {
                events.add(new KvEvent.Stored(1, 0, "e", "GPU", null, c.hashHex(), null, CHUNK, -1));
                if (p % 2 == 0) {
                    events.add(new KvEvent.Stored(1, 0, "e", "valkey://store:6379", null, c.hashHex(), null, CHUNK,
                            -1));
                }
            }
            feeds.get(engine).accept(new KvEventBatch(new KvEventSource("e", 1, null, null, CHUNK, rootHex),
                    seq[engine]++, 0, events));
        }
        if (router.index.size() != INDEXED_CHUNKS) {
            throw new IllegalStateException("indexed " + router.index.size() + " chunks, not " + INDEXED_CHUNKS);
        }
        miss = json.createObjectNode().put("prompt", text(random, promptTokens));
    }

    private static String text(Random random, int tokens) {
        char[] c = new char[tokens];
        for (int i = 0; i < tokens; i++) {
            c[i] = (char) ('a' + random.nextInt(26));
        }
        return new String(c);
    }

    private static int[] bytes(String ascii) {
        int[] ids = new int[ascii.length()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = ascii.charAt(i);
        }
        return ids;
    }

    /** Closes the router (it started no threads). */
    @TearDown(Level.Trial)
    public void tearDown() {
        router.close();
    }

    /** Routes a prompt whose every chunk one engine holds. */
    @Benchmark
    public Instance routeHit() {
        ObjectNode body = hits[next++ % hits.length];
        return selector.pick(prefill, null, 0, router.route(body));
    }

    /** Routes a prompt nobody holds. */
    @Benchmark
    public Instance routeMiss() {
        return selector.pick(prefill, null, 0, router.route(miss));
    }
}
