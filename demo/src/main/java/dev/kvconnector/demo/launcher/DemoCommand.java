package dev.kvconnector.demo.launcher;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.proxy.Policy;
import dev.kvconnector.proxy.ProxyConfig;
import dev.kvconnector.proxy.ProxyFlow;
import dev.kvconnector.store.StoreUri;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvctl demo}: the whole XpYd design on one machine with no setup. Starts X prefill and Y decode demo
 * engines as child JVMs sharing a {@code shm:} store, the XpYd proxy in-process in front of them, and a single
 * in-process engine as the reference; sends the same workload through the proxy twice (KV loaded whole after
 * the prefill, then layer by layer; with {@code --transport p2p}, peer to peer in the v1 and concurrent flows; with
 * {@code p2p+store}, peer to peer beside the store, then from the store alone), checks every answer against the
 * reference token for token, and reports
 * time to first token, per-layer insert and copy latency (and, layer by layer, the wait for P), hit rate, miss
 * reasons and bytes moved (per transport with {@code p2p+store}) on the terminal, in {@code DIR/demo.json} and in
 * {@code DIR/demo.html}, with the load average and core count. With {@code --workload multi-turn} the runs are those
 * of {@link MultiTurn} instead: the routing policies (and a tiered store's tiers) side by side. Exits 1 when any
 * answer differs or fails.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Run XpYd disaggregated prefill end to end on this machine and report what it does.")
public final class DemoCommand implements Callable<Integer> {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Option(names = "--prefill", description = "Prefill engines (default 2; 3 with --workload multi-turn).")
    Integer prefill;

    @Option(names = "--decode", description = "Decode engines (default 2; 1 with --workload multi-turn).")
    Integer decode;

    @Option(names = "--requests", defaultValue = "40", description = "Requests per run (default ${DEFAULT-VALUE}).")
    int requests;

    @Option(names = "--store", description = "Shared KV store URI (default: a fresh shm:/kvc-demo-PID?capacity=1GiB, "
            + "removed at exit). P and D are separate processes, so memory: cannot work.")
    String store;

    @Option(names = "--scheme",
            description = "Key scheme, with the codec it implies: kvc-v1 (kvconnector's objects, with hidden states and "
                    + "checksums) or vllm-v1 (vLLM V1's MooncakeStoreConnector keys and values: one object per full "
                    + "block, no hidden states, so decode recomputes the tail) (default kvc-v1; vllm-v1 with "
                    + "--transport p2p+store, whose store keeps prompts for any request with the prefix).")
    String scheme;

    @Option(names = "--flow", defaultValue = "concurrent",
            description = "Proxy flow of the layer-wise run: v1 or concurrent (default ${DEFAULT-VALUE}: D starts "
                    + "with P and loads each layer as P stores it). The first run always uses v1, because a decode "
                    + "engine that loads the KV whole must wait for the prefill to finish.")
    String flow;

    @Option(names = "--transport", defaultValue = "store",
            description = "How D's KV arrives: store (through --store, two runs: whole, then layer by layer), p2p "
                    + "(from P's memory straight into D's through the transfer engine: D sends P its destination, P "
                    + "writes each layer; a v1 run, then a --flow concurrent one where P writes each layer as it "
                    + "computes it) or p2p+store (both at once, as vLLM's MultiConnector: P2P for the request in "
                    + "flight in the --flow run, and --store keeps every prompt; then a run of the same prompts sent "
                    + "to a decode engine alone, loaded from the store) (default ${DEFAULT-VALUE}).")
    String transport;

    @Option(names = "--p2p-engine",
            description = "Transfer engine URI of --transport p2p and p2p+store (default: mooncake-te://127.0.0.1 over MOONCAKE_TE_LIB, "
                    + "else the test double native/target/lib/libmooncake_te_double.so, loopback TCP).")
    String p2pEngine;

    @Option(names = "--out", defaultValue = "demo-results", description = "Report directory (default ${DEFAULT-VALUE}).")
    Path out;

    @Option(names = "--tiny", description = "The 2-layer test model instead of the 8-layer default.")
    boolean tiny;

    @Option(names = "--max-tokens", defaultValue = "12", description = "Tokens generated per request (default ${DEFAULT-VALUE}).")
    int maxTokens;

    @Option(names = "--clients", defaultValue = "4", description = "Concurrent clients (default ${DEFAULT-VALUE}).")
    int clients;

    @Option(names = "--min-prompt", defaultValue = "16", description = "Shortest prompt in bytes = tokens (default ${DEFAULT-VALUE}).")
    int minPrompt;

    @Option(names = "--max-prompt", defaultValue = "160", description = "Longest prompt in bytes = tokens (default ${DEFAULT-VALUE}).")
    int maxPrompt;

    @Option(names = "--workload", defaultValue = "default",
            description = "default (independent prompts: the single engine, then XpYd whole and layer by layer) or "
                    + "multi-turn (conversations whose each turn extends the last, with prefill engines that keep a "
                    + "prefix cache: the single engine, then round-robin and kv-aware routing on fresh engines, and "
                    + "with a tiered: store kv-aware on its last tier alone) (default ${DEFAULT-VALUE}).")
    String workload;

    @Option(names = "--turns", defaultValue = "8",
            description = "multi-turn: turns per conversation, at least 2; --requests / --turns conversations "
                    + "(default ${DEFAULT-VALUE}).")
    int turns;

    @Option(names = "--chunk-tokens", defaultValue = "16",
            description = "multi-turn: tokens per chunk of the store's keys and of the prefill engines' prefix "
                    + "caches, a multiple of 16 (default ${DEFAULT-VALUE}).")
    int chunkTokens;

    @Option(names = "--kv-decode-max-suffix", paramLabel = "TOKENS",
            defaultValue = "" + ProxyConfig.DEFAULT_KV_DECODE_MAX_SUFFIX,
            description = "multi-turn: the kv-aware proxy sends a prompt to a decode engine alone when the store holds "
                    + "a prefix of it and at most this many tokens follow; 0 only when it holds the whole prompt "
                    + "(kvctl proxy --kv-decode-max-suffix) (default ${DEFAULT-VALUE}).")
    int kvDecodeMaxSuffix;

    @Option(names = "--start-timeout-s", defaultValue = "120",
            description = "How long an engine process may take to answer /health, in s (default ${DEFAULT-VALUE}).")
    int startTimeoutSeconds;

    /** Entry point for running the demo without kvctl. */
    public static void main(String[] args) {
        System.exit(new CommandLine(new DemoCommand()).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        // Issue 20's goal is judged against round robin, which finds a conversation's P again 1 time in P: at 2 Ps even
        // the single engine's own prefix cache recomputes only 40% fewer prompt tokens than it here (demo/README.md).
        boolean conversations = "multi-turn".equals(workload);
        prefill = prefill != null ? prefill : conversations ? 3 : 2;
        decode = decode != null ? decode : conversations ? 1 : 2;
        if (prefill < 1 || decode < 1 || requests < 1 || clients < 1 || maxTokens < 1 || minPrompt < 16
                || maxPrompt < minPrompt) {
            throw new CommandLine.ParameterException(new CommandLine(this), "need --prefill, --decode, --requests, "
                    + "--clients, --max-tokens >= 1 and 16 <= --min-prompt <= --max-prompt");
        }
        ProxyFlow secondFlow = switch (flow.toLowerCase(Locale.ROOT)) {
            case "v1" -> ProxyFlow.V1;
            case "concurrent" -> ProxyFlow.CONCURRENT;
            default -> throw new CommandLine.ParameterException(new CommandLine(this),
                    "--flow must be v1 or concurrent, not " + flow + " (v0 has no kv_transfer_params to share)");
        };
        boolean p2p = switch (transport) {
            case "store" -> false;
            case "p2p", "p2p+store" -> true;
            default -> throw new CommandLine.ParameterException(new CommandLine(this),
                    "--transport must be store, p2p or p2p+store, not " + transport);
        };
        boolean p2pStore = transport.equals("p2p+store");
        if (scheme == null) {
            scheme = p2pStore ? "vllm-v1" : "kvc-v1";
        }
        MultiTurn multiTurn = multiTurn(p2p);
        String storeUri = store;
        Path shmFile = null;
        if (storeUri == null) {
            String name = "kvc-demo-" + ProcessHandle.current().pid();
            storeUri = "shm:/" + name + "?capacity=1GiB";
            shmFile = Path.of("/dev/shm", name);
        }
        Files.createDirectories(out);
        PrintStream err = System.err;
        DemoCleanup cleanup = new DemoCleanup(shmFile);
        Thread hook = new Thread(cleanup::close, "kvctl-demo-cleanup");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            double loadAtStart = DemoReport.loadAverage();
            err.println("kvctl demo: " + prefill + "P" + decode + "D, " + requests + " requests"
                    + (multiTurn == null ? "" : " in conversations of " + turns + " turns") + ", "
                    + (tiny ? "tiny" : "8-layer") + " model, " + (p2p ? "transport " + transport + " ("
                    + p2pEngineUri() + ")" : "store " + StoreUri.parse(storeUri).masked()));
            err.printf(Locale.ROOT, "machine: %d cores, load average (1 min) %.2f%n",
                    Runtime.getRuntime().availableProcessors(), loadAtStart);
            List<String> prompts = Workload.prompts(requests, minPrompt, maxPrompt, 42);
            DemoReport.Run reference = multiTurn != null ? multiTurn.single(cleanup, err)
                    : referenceRun(prompts, cleanup, err);
            List<DemoReport.Run> runs = new ArrayList<>();
            if (multiTurn != null) {
                runs.addAll(multiTurn.xpyd(storeUri, scheme, cleanup, err));
            } else if (p2p) {
                // D sends P its destination; P's address comes from P's answer (v1) or the proxy (concurrent).
                List<String> p2pArgs = List.of("--transport", transport, "--p2p-engine", p2pEngineUri());
                if (!p2pStore) {
                    runs.add(xpydRun("xpyd-p2p", ProxyFlow.V1, true, p2pArgs, prompts, storeUri, cleanup, err));
                }
                if (p2pStore || secondFlow == ProxyFlow.CONCURRENT) {
                    runs.add(xpydRun("xpyd-" + transport + (secondFlow == ProxyFlow.CONCURRENT ? "-concurrent" : ""),
                            secondFlow, true, p2pArgs, prompts, storeUri, cleanup, err));
                }
                if (p2pStore) {
                    runs.add(storeReuseRun(p2pArgs, prompts, storeUri, cleanup, err));
                }
            } else {
                runs.add(xpydRun("xpyd", ProxyFlow.V1, false, List.of(), prompts, storeUri, cleanup, err));
                runs.add(xpydRun("xpyd-layerwise", secondFlow, true, List.of(), prompts, storeUri, cleanup, err));
            }
            ObjectNode config = JSON.createObjectNode().put("prefill", prefill).put("decode", decode)
                    .put("requests", requests).put("max_tokens", maxTokens).put("clients", clients)
                    .put("min_prompt_tokens", minPrompt).put("max_prompt_tokens", maxPrompt)
                    .put("model", tiny ? "tiny" : "small").put("store", StoreUri.parse(storeUri).masked()).put("scheme", scheme)
                    .put("layer_wise_flow", secondFlow.name().toLowerCase(Locale.ROOT))
                    .put("transport", transport).put("workload", workload);
            if (multiTurn != null) {
                config.put("requests", requests / turns * turns).put("turns", turns)
                        .put("conversations", requests / turns).put("chunk_tokens", chunkTokens)
                        .put("kv_decode_max_suffix", kvDecodeMaxSuffix).put("save_decode_kv", true)
                        .put("layer_wise_flow", "none");
                config.remove(List.of("min_prompt_tokens", "max_prompt_tokens"));
            }
            if (p2p) {
                config.put("p2p_engine", p2pEngineUri());
            }
            if (p2p && !p2pStore) {
                config.put("store", "none");
            }
            DemoReport report = new DemoReport(config, loadAtStart, reference, runs);
            ReportFile.write(out.resolve("demo.json"),
                    o -> JSON.writerWithDefaultPrettyPrinter().writeValue(o, report.json()));
            ReportFile.write(out.resolve("demo.html"), o -> o.write(report.html().getBytes(StandardCharsets.UTF_8)));
            System.out.print(report.text());
            System.out.println("report: " + out.resolve("demo.json") + ", " + out.resolve("demo.html"));
            return report.tokensEqual() ? 0 : 1;
        } finally {
            cleanup.close();
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // The hook is running or has run; cleanup is idempotent.
            }
        }
    }

    private DemoReport.Run referenceRun(List<String> prompts, DemoCleanup cleanup, PrintStream err) throws Exception {
        return DemoRuns.single(tiny, List.of(), (label, base) -> LoadRunner.run(label, base, DemoRuns.MODEL, prompts,
                maxTokens, clients, err), cleanup);
    }

    /** The multi-turn workload's runs, or null for the default workload; checks the options that go with it. */
    private MultiTurn multiTurn(boolean p2p) {
        if ("default".equals(workload)) {
            return null;
        }
        if (!"multi-turn".equals(workload)) {
            throw new CommandLine.ParameterException(new CommandLine(this),
                    "--workload must be default or multi-turn, not " + workload);
        }
        if (turns < 2 || requests < turns || chunkTokens < 16 || chunkTokens % 16 != 0 || kvDecodeMaxSuffix < 0) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--workload multi-turn needs --turns >= 2,"
                    + " --requests >= --turns, --chunk-tokens a multiple of 16 and --kv-decode-max-suffix >= 0; got "
                    + "--turns " + turns + ", --requests " + requests + ", --chunk-tokens " + chunkTokens
                    + ", --kv-decode-max-suffix " + kvDecodeMaxSuffix);
        }
        if (p2p || !"kvc-v1".equals(scheme)) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--workload multi-turn runs over a store "
                    + "with kvc-v1 keys, whose chunk hashes the proxy computes; not with --transport " + transport
                    + " and --scheme " + scheme);
        }
        return new MultiTurn(new MultiTurn.Settings(prefill, decode, requests / turns, turns, chunkTokens, maxTokens,
                clients, kvDecodeMaxSuffix, tiny, out.resolve("logs"), Duration.ofSeconds(startTimeoutSeconds)));
    }

    /** {@code --p2p-engine}, else a loopback engine over MOONCAKE_TE_LIB or the test double built here. */
    private String p2pEngineUri() {
        if (p2pEngine != null) {
            return p2pEngine;
        }
        String lib = System.getenv("MOONCAKE_TE_LIB");
        if (lib == null || lib.isBlank()) {
            Path dbl = Path.of(System.getProperty("kvc.mooncake.te.double",
                    "native/target/lib/libmooncake_te_double.so")).toAbsolutePath();
            if (!Files.exists(dbl)) {
                throw new CommandLine.ParameterException(new CommandLine(this), "--transport p2p needs a transfer "
                        + "engine: the test double is not built at " + dbl + " (build the native module, set "
                        + "MOONCAKE_TE_LIB, or give --p2p-engine)");
            }
            lib = dbl.toString();
        }
        return "mooncake-te://127.0.0.1?protocol=tcp&library=" + lib;
    }

    private DemoReport.Run xpydRun(String name, ProxyFlow proxyFlow, boolean layerWise, List<String> engineArgs,
            List<String> prompts, String storeUri, DemoCleanup cleanup, PrintStream err) throws Exception {
        err.println("starting " + prefill + " prefill and " + decode + " decode engines" + (layerWise ? " (layer-wise)" : "")
                + (engineArgs.isEmpty() ? "" : " " + String.join(" ", engineArgs)));
        // Peer-to-peer runs are all layer-wise: each gets its own log folder, so one does not overwrite another's.
        Path logs = engineArgs.isEmpty() ? out.resolve("logs") : out.resolve("logs").resolve(name);
        DemoRuns.Spec spec = new DemoRuns.Spec(name, proxyFlow, Policy.ROUND_ROBIN,
                ProxyConfig.DEFAULT_KV_DECODE_MAX_SUFFIX, layerWise, prefill, decode,
                storeUri, scheme, tiny, engineArgs, engineArgs, logs, Duration.ofSeconds(startTimeoutSeconds));
        return DemoRuns.xpyd(spec, (label, base) -> LoadRunner.run(label, base, DemoRuns.MODEL, prompts, maxTokens,
                clients, err), cleanup);
    }

    /**
     * {@code --transport p2p+store}'s second run: the same prompts straight to one decode engine started alone, with
     * no P and no proxy (as a cache-aware proxy sends a prompt the store holds): each loads from the store.
     */
    private DemoReport.Run storeReuseRun(List<String> engineArgs, List<String> prompts, String storeUri,
                                         DemoCleanup cleanup, PrintStream err) throws Exception {
        err.println("starting a decode engine alone, to load the same prompts from the store");
        try (EngineFleet fleet = EngineFleet.start(0, 1, storeUri, scheme, tiny, true, engineArgs,
                out.resolve("logs").resolve("store-reuse"), Duration.ofSeconds(startTimeoutSeconds))) {
            cleanup.fleet = fleet;
            long t0 = System.nanoTime();
            List<LoadRunner.Result> results = LoadRunner.run("store-reuse (decode alone)",
                    fleet.members().getFirst().uri(), DemoRuns.MODEL, prompts, maxTokens, clients, err);
            double wall = (System.nanoTime() - t0) / 1e6;
            return new DemoReport.Run("store-reuse", "none", false, wall, results, fleet.kvMetrics(),
                    DemoReport.loadAverage());
        } finally {
            cleanup.fleet = null;
        }
    }
}
