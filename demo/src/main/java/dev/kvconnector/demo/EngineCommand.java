package dev.kvconnector.demo;

import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
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

    @Option(names = "--layer-wise", description = "Load KV layer by layer as the producer stores it.")
    boolean layerWise;

    @Option(names = "--model-name", defaultValue = "kvc-demo",
            description = "Name served in /v1/models and expected in requests (default ${DEFAULT-VALUE}).")
    String modelName;

    @Option(names = "--tiny", description = "Serve the 2-layer test model instead of the 8-layer default.")
    boolean tiny;

    @Option(names = "--kv-blocks", defaultValue = "0",
            description = "Blocks of 16 tokens in the paged KV cache; 0 means four full contexts.")
    int kvBlocks;

    @Option(names = "--layer-timeout-ms", defaultValue = "10000",
            description = "How long a layer-wise load waits for the producer, in ms (default ${DEFAULT-VALUE}).")
    long layerTimeoutMillis;

    private final CountDownLatch stopped = new CountDownLatch(1);

    /** Entry point. */
    public static void main(String[] args) {
        System.exit(new CommandLine(new EngineCommand()).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        KVRole kvRole = KVRole.parse(role);
        ModelConfig config = tiny ? ModelConfig.tiny(seed) : ModelConfig.small(seed);
        ModelWeights weights = ModelWeights.random(config);
        KVStore kvStore = kvRole == KVRole.NONE || store == null ? null : KVStores.open(store);
        if (kvRole != KVRole.NONE && kvStore == null) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--role " + role + " needs --store URI");
        }
        KVStoreConnector connector = kvStore == null ? null : KVStoreConnector.builder(kvStore, config.kvLayout())
                .modelId(config.modelId()).layerTimeoutMillis(layerTimeoutMillis).build();
        Engine.Builder eb = Engine.builder(weights).role(kvRole, connector).layerWise(layerWise);
        if (kvBlocks > 0) {
            eb.cacheBlocks(kvBlocks);
        }
        Engine engine = eb.build();
        EngineServer server = EngineServer.start(engine, host, port, modelName);
        System.out.println("engine " + engine.engineId() + " (" + kvRole.vllmName() + ", " + config.modelId()
                + ") listening on " + server.baseUri());
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.close();
            engine.close();
            if (connector != null) {
                connector.close();
                kvStore.close();
            }
            stopped.countDown();
        }, "engine-shutdown"));
        stopped.await();
        return 0;
    }
}
