package dev.kvconnector.demo.launcher;

import dev.kvconnector.proxy.Policy;
import dev.kvconnector.proxy.ProxyFlow;
import dev.kvconnector.store.StoreUri;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * {@code kvctl demo --workload multi-turn}: conversations that share prefixes ({@link Conversations}), sent under
 * {@code round-robin} and under {@code kv-aware} on fresh engines over the same store, and, when the store is
 * {@code tiered:}, under {@code kv-aware} once more on its last tier alone.
 *
 * <p>What makes routing matter here, and keeps the comparison fair:
 * <ul>
 *   <li>The prefill engines keep their own prefix cache ({@code --prefix-cache}) and publish it as KV events, so the
 *       proxy knows which P already holds a conversation's history; P reads nothing from the store, so only routing
 *       brings P its cached prefix.</li>
 *   <li>Every engine stores content-addressed chunks ({@code --share-prefixes}: no transfer id, retained on load), so
 *       the store's events credit it with every prompt P stored, and a prompt it holds whole goes to D alone.</li>
 *   <li>The decode engines save each answer's KV with its prompt ({@code --save-decode-kv}), since only they ever
 *       compute it, so the store holds a conversation up to its last answer; under kv-aware a next turn of which the
 *       store lacks at most {@code --kv-decode-max-suffix} tokens goes to D alone, which loads the rest.</li>
 *   <li>Chunks are {@code --chunk-tokens} (16 by default) instead of the connector's 256, which no prompt of this
 *       workload would fill.</li>
 *   <li>Both policies run the same engines with the same flags; only the proxy's policy differs. Each run has its
 *       own key tag ({@code --key-tag}), so no run reads what an earlier one stored, even in a store the demo does
 *       not own.</li>
 * </ul>
 * The flow is v1: D loads after P has stored the prompt. D keeps no prefix cache; it loads from the store. Round
 * robin never sends a request to D alone, so there D's saves only cost it time: P reads nothing from the store.
 */
final class MultiTurn {
    /** The seed of the conversations' text and of the order in which clients take ready turns. */
    private static final long SEED = 42;

    /**
     * The workload's settings.
     *
     * @param prefill       prefill engines
     * @param decode        decode engines
     * @param conversations conversations
     * @param turns         turns per conversation (at least 2)
     * @param chunkTokens   tokens per chunk of keys and prefix caches
     * @param maxTokens     tokens generated per turn
     * @param clients       concurrent clients
     * @param kvDecodeMaxSuffix the kv-aware proxy's {@code --kv-decode-max-suffix}, in tokens
     * @param tiny          the 2-layer model
     * @param logDir        where each run's engine logs go, a folder per run
     * @param startTimeout  how long an engine may take to start
     */
    record Settings(int prefill, int decode, int conversations, int turns, int chunkTokens, int maxTokens,
                    int clients, int kvDecodeMaxSuffix, boolean tiny, Path logDir, Duration startTimeout) {
    }

    private final Settings settings;
    private final List<Conversations.Conversation> script;
    /** A prefix of every run's key tag, new for each demo, so nothing of an earlier demo is found in a kept store. */
    private final String tagPrefix = "mt-" + UUID.randomUUID().toString().substring(0, 8);

    MultiTurn(Settings settings) {
        this.settings = settings;
        this.script = Conversations.build(settings.conversations(), settings.turns(), SEED);
    }

    /** The reference: one engine with the same prefix cache, whose answers every run must match. */
    DemoReport.Run single(DemoCleanup cleanup, PrintStream err) throws Exception {
        return DemoRuns.single(settings.tiny(), List.of("--prefix-cache", "--chunk-tokens",
                Integer.toString(settings.chunkTokens())), load(err), cleanup);
    }

    /**
     * The XpYd runs over {@code storeUri}: round-robin, kv-aware, and for a {@code tiered:} store kv-aware on its last
     * tier alone ({@link #lastTierAlone}).
     */
    List<DemoReport.Run> xpyd(String storeUri, String scheme, DemoCleanup cleanup, PrintStream err) throws Exception {
        List<DemoReport.Run> runs = new ArrayList<>();
        runs.add(run("round-robin", Policy.ROUND_ROBIN, storeUri, scheme, cleanup, err));
        runs.add(run("kv-aware", Policy.KV_AWARE, storeUri, scheme, cleanup, err));
        String alone = lastTierAlone(storeUri);
        if (alone != null) {
            runs.add(run("kv-aware, last tier alone", Policy.KV_AWARE, alone, scheme, cleanup, err));
        }
        return runs;
    }

    private DemoReport.Run run(String name, Policy policy, String storeUri, String scheme, DemoCleanup cleanup,
                               PrintStream err) throws Exception {
        List<String> common = List.of("--share-prefixes", "--chunk-tokens", Integer.toString(settings.chunkTokens()),
                "--key-tag", tagPrefix + "-" + name.replaceAll("[^a-z]+", "-"),
                "--kv-events", "tcp://127.0.0.1:0", "--kv-events-replay", "tcp://127.0.0.1:0");
        List<String> prefillArgs = new ArrayList<>(common);
        prefillArgs.add("--prefix-cache");
        List<String> decodeArgs = new ArrayList<>(common);
        decodeArgs.add("--save-decode-kv");
        err.println("starting " + settings.prefill() + " prefill and " + settings.decode() + " decode engines for "
                + name + " over " + StoreUri.parse(storeUri).masked());
        DemoRuns.Spec spec = new DemoRuns.Spec(name, ProxyFlow.V1, policy, settings.kvDecodeMaxSuffix(), false,
                settings.prefill(), settings.decode(), storeUri, scheme, settings.tiny(), prefillArgs, decodeArgs,
                settings.logDir().resolve(name.replaceAll("[^a-z]+", "-")), settings.startTimeout());
        return DemoRuns.xpyd(spec, load(err), cleanup);
    }

    private DemoRuns.Load load(PrintStream err) {
        return (label, base) -> LoadRunner.runConversations(label, base, DemoRuns.MODEL, script, settings.maxTokens(),
                settings.clients(), SEED, err);
    }

    /**
     * For {@code tiered:[A]...[Z]} with two tiers or more, {@code tiered:[Z]}: the last (remote) tier alone, as a
     * tiered store of one tier, which passes every call straight to it and counts its hits and bytes the way the
     * tiered run counts them; null for any other store.
     */
    static String lastTierAlone(String storeUri) {
        StoreUri uri = StoreUri.parse(storeUri);
        List<String> tiers = uri.nested();
        if (!"tiered".equals(uri.scheme()) || tiers.size() < 2) {
            return null;
        }
        return "tiered:[" + tiers.getLast() + "]";
    }
}
