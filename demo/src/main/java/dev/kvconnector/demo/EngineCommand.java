package dev.kvconnector.demo;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.events.ZmqKvEventPublisher;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Runs one demo engine instance behind its OpenAI-compatible HTTP server until the process is stopped:
 * {@code java -cp ... dev.kvconnector.demo.EngineCommand --port 8100 --role kv_producer --store memory:}.
 */
@Command(name = "engine", mixinStandardHelpOptions = true,
        description = "Serve the kvconnector demo engine (a small Llama-style model) over an OpenAI-compatible API.")
public final class EngineCommand implements Callable<Integer> {
    @Option(names = "--host", defaultValue = "127.0.0.1", description = "Address to bind (default ${DEFAULT-VALUE}).")
    String host;

    @Option(names = "--port", defaultValue = "8100", description = "Port to bind; 0 picks one (default ${DEFAULT-VALUE}).")
    int port;

    @Option(names = "--role", defaultValue = "none",
            description = "kv_producer, kv_consumer, kv_both or none (default ${DEFAULT-VALUE}).")
    String role;

    @Option(names = "--store", description = "KV store URI, such as memory: or shm:/name; required unless the role is none.")
    String store;

    @Option(names = "--seed", defaultValue = "0", description = "Seed of the model's weights (default ${DEFAULT-VALUE}).")
    long seed;

    @Option(names = "--scheme", defaultValue = "kvc-v1",
            description = "Key scheme, with the codec it implies: kvc-v1 or vllm-v1 (default ${DEFAULT-VALUE}).")
    String scheme;

    @Option(names = "--layer-wise", description = "Load KV layer by layer as the producer stores it.")
    boolean layerWise;

    @Option(names = "--model-name", defaultValue = "kvc-demo",
            description = "Name served in /v1/models and expected in requests (default ${DEFAULT-VALUE}).")
    String modelName;

    @Option(names = "--tiny", description = "Serve the 2-layer test model instead of the 8-layer default.")
    boolean tiny;

    @Option(names = "--weights", description = "Safetensors file of Hugging Face Llama weights for the model's config "
            + "(F32, BF16 or F16, tied output head); default: weights drawn from --seed.")
    Path weightsFile;

    @Option(names = "--kv-blocks", defaultValue = "0",
            description = "Blocks of 16 tokens in the paged KV cache; 0 means four full contexts.")
    int kvBlocks;

    @Option(names = "--layer-timeout-ms", defaultValue = "10000",
            description = "How long a layer-wise load waits for the producer, in ms (default ${DEFAULT-VALUE}).")
    long layerTimeoutMillis;

    @Option(names = "--kv-events", paramLabel = "ENDPOINT",
            description = "Publish the connector's KV events in vLLM's wire format on this ZMQ PUB endpoint, such as "
                    + "tcp://*:5557 (for kvctl proxy --policy kv-aware); port 0 picks one.")
    String kvEvents;

    @Option(names = "--kv-events-replay", paramLabel = "ENDPOINT",
            description = "The ROUTER endpoint that answers replays and snapshots of the KV events, such as tcp://*:5558.")
    String kvEventsReplay;

    @Option(names = "--transport", defaultValue = "store",
            description = "How KV moves from P to D: store (through --store), p2p (peer to peer through the "
                    + "transfer engine --p2p-engine; the proxy's v1 or concurrent flow) or p2p+store (both: P2P for "
                    + "the request in flight, and --store, with --scheme, keeps the prompt for prefix reuse) "
                    + "(default ${DEFAULT-VALUE}).")
    String transport;

    @Option(names = "--p2p-engine", defaultValue = "mooncake-te://127.0.0.1?protocol=tcp",
            description = "Transfer engine URI of --transport p2p; library= or MOONCAKE_TE_LIB names the library "
                    + "(default ${DEFAULT-VALUE}).")
    String p2pEngine;

    @Option(names = "--chunk-tokens", defaultValue = "0",
            description = "Tokens per chunk of the store's keys and of the prefix cache; 0 keeps the connector's "
                    + "default (kvc.connector.chunk-tokens, 256).")
    int chunkTokens;

    @Option(names = "--prefix-cache",
            description = "Keep the full chunks of finished requests in the paged cache for later prompts that start "
                    + "with them (vLLM's automatic prefix caching; least recently used evicted first), and publish them "
                    + "with --kv-events. For kv_producer and none.")
    boolean prefixCache;

    @Option(names = "--share-prefixes",
            description = "Store keys without the request's transfer id, so every request with a prefix shares its "
                    + "objects, retained on load; no hidden states (the consumer computes the last prompt token).")
    boolean sharePrefixes;

    @Option(names = "--save-decode-kv",
            description = "kv_consumer, kv_both with --share-prefixes: after each request, save the full chunks of its "
                    + "prompt and answer into the store (the conversation's next turn then finds the answer's KV "
                    + "there), unless the store holds them all; counted under decode_save in /kv/metrics.")
    boolean saveDecodeKv;

    @Option(names = "--key-tag", paramLabel = "TAG",
            description = "Added to the model id in every store key, so engines with other tags (or none) never read "
                    + "these engines' KV; kvctl demo gives each run its own.")
    String keyTag;

    /** Entry point. */
    public static void main(String[] args) {
        System.exit(new CommandLine(new EngineCommand()).execute(args));
    }

    @Override
    public Integer call() throws InterruptedException {
        Running running = start();
        if (running.events() != null) {
            // Before the listening line: a launcher that has read that one finds this one too.
            System.out.println("engine " + running.engine().engineId() + " KV events on "
                    + running.events().publishEndpoint() + (running.events().replayEndpoint() == null ? ""
                    : "," + running.events().replayEndpoint()));
        }
        System.out.println("engine " + running.engine().engineId() + " (" + running.engine().role().vllmName() + ", "
                + running.engine().config().modelId() + ") listening on " + running.server().baseUri());
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running.close();
            stopped.countDown();
        }, "engine-shutdown"));
        stopped.await();
        return 0;
    }

    /**
     * Builds the model, opens the store, and starts the engine and its server with this command's options, for
     * launchers that run instances in-process.
     */
    public Running start() {
        KVRole kvRole = KVRole.parse(role);
        boolean p2p = switch (transport) {
            case "store" -> false;
            case "p2p", "p2p+store" -> true;
            default -> throw KVException.of(ErrorCode.INVALID_CONFIG, "--transport must be store, p2p or p2p+store, "
                    + "not " + transport).build();
        };
        boolean withStore = !p2p || transport.equals("p2p+store");
        if (kvRole != KVRole.NONE && store == null && withStore) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, "role " + kvRole.vllmName() + " with --transport "
                    + transport + " needs a KV store").hint("pass --store URI, such as memory: or shm:/name").build();
        }
        ModelConfig config = tiny ? ModelConfig.tiny(seed) : ModelConfig.small(seed);
        ModelWeights weights = weightsFile == null ? ModelWeights.random(config) : ModelWeights.load(config, weightsFile);
        KVStore kvStore = kvRole == KVRole.NONE || p2p ? null : KVStores.open(store);
        boolean namespaced = KeySchemes.byName(scheme).bindsNamespace() && !sharePrefixes;
        String keyModelId = keyTag == null ? config.modelId() : config.modelId() + "@" + keyTag;
        String instance = host + ":" + port;
        KVStoreConnector connector = null;
        Engine engine = null;
        ZmqKvEventPublisher events = null;
        try {
            if (kvStore != null) {
                var cb = KVStoreConnector.builder(kvStore, config.kvLayout()).modelId(keyModelId)
                        .keyScheme(scheme).layerTimeoutMillis(layerTimeoutMillis)
                        // Keys without a namespace are shared by every request with the prefix: keep them for those.
                        .dropMode(namespaced ? DropMode.CONSUME : DropMode.RETAIN);
                if (kvEvents != null) {
                    events = ZmqKvEventPublisher.bind(kvEvents, kvEventsReplay);
                    cb.events(events).instanceId(instance);
                }
                if (chunkTokens > 0) {
                    cb.chunkTokens(chunkTokens);
                }
                connector = cb.build();
            }
            Engine.Builder eb = Engine.builder(weights).role(kvRole, connector).layerWise(layerWise)
                    .sharePrefixes(sharePrefixes).saveDecodeKv(saveDecodeKv);
            if (prefixCache) {
                eb.prefixCache(connector != null ? connector.keyContext().chunkTokens()
                        : chunkTokens > 0 ? chunkTokens : KeyContext.DEFAULT_CHUNK_TOKENS, events, instance);
            }
            if (p2p && kvRole != KVRole.NONE) {
                eb.p2p(P2pTransport.kvTransferConfig(kvRole, p2pEngine, layerTimeoutMillis, withStore ? store : null,
                        scheme));
            }
            if (kvBlocks > 0) {
                eb.cacheBlocks(kvBlocks);
            }
            engine = eb.build();
            return new Running(EngineServer.start(engine, kvStore, host, port, modelName), engine, connector, events,
                    kvStore);
        } catch (RuntimeException e) {
            new Running(null, engine, connector, events, kvStore).close();
            throw e;
        }
    }

    /**
     * A started instance: its server, engine, connector, event publisher and store (all but the first two null with
     * role none). Closing stops the server and frees everything in reverse order.
     *
     * @param server the HTTP server
     * @param engine the engine
     * @param connector the connector, or null
     * @param events the connector's KV event publisher ({@code --kv-events}), or null
     * @param store the store, or null
     */
    public record Running(EngineServer server, Engine engine, KVStoreConnector connector, ZmqKvEventPublisher events,
                          KVStore store) implements AutoCloseable {
        @Override
        public void close() {
            if (server != null) {
                server.close();
            }
            if (engine != null) {
                engine.close();
            }
            if (connector != null) {
                connector.close();
            }
            if (events != null) {
                events.close();
            }
            if (store != null) {
                store.close();
            }
        }
    }
}
