package dev.kvconnector.proxy;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code kvctl proxy}: runs an {@link XpydProxy} until interrupted. The admin key is read from the
 * environment variable {@code ADMIN_API_KEY} or from {@code --admin-key-file}, never from the command line,
 * where other users of the machine could read it.
 */
@Command(name = "proxy", mixinStandardHelpOptions = true,
        description = "Run the XpYd global proxy: an OpenAI-compatible front over prefill and decode instances.")
public final class ProxyCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--model", required = true, description = "Model every instance serves.")
    String model;

    @Option(names = "--prefill", arity = "1..*", split = ",", paramLabel = "HOST:PORT", converter = Address.class,
            description = "Prefill instances.")
    List<String> prefill = new ArrayList<>();

    @Option(names = "--decode", arity = "1..*", split = ",", required = true, paramLabel = "HOST:PORT",
            converter = Address.class,
            description = "Decode instances.")
    List<String> decode = new ArrayList<>();

    @Option(names = "--host", defaultValue = "0.0.0.0", description = "Listen address (default: ${DEFAULT-VALUE}).")
    String host;

    @Option(names = "--port", defaultValue = "8000", description = "Listen port (default: ${DEFAULT-VALUE}).")
    int port;

    @Option(names = "--flow", defaultValue = "v0", converter = FlowChoice.class,
            description = "v0, v1 or concurrent (default: ${DEFAULT-VALUE}).")
    ProxyFlow flow;

    @Option(names = "--policy", defaultValue = "round-robin", converter = PolicyChoice.class,
            description = "round-robin, least-outstanding, prefix-affinity or kv-aware (default: ${DEFAULT-VALUE}).")
    Policy policy;

    @Option(names = "--kv-events", paramLabel = "HOST:PORT=PUB[,REPLAY]", converter = KvEventsChoice.class,
            description = "An engine's KV event endpoints for --policy kv-aware, e.g. "
                    + "10.0.0.5:8100=tcp://10.0.0.5:5557,tcp://10.0.0.5:5558; repeat per engine.")
    List<KvEventEndpoint> kvEvents = new ArrayList<>();

    @Option(names = "--kv-tokenizer", defaultValue = "bytes", converter = KvTokenizerChoice.class,
            description = "How kv-aware tokenizes text prompts: bytes (the demo engine's UTF-8 bytes) or token-ids "
                    + "(only token-id prompts are routed by cache) (default: ${DEFAULT-VALUE}).")
    KvTokenizer kvTokenizer;

    @Option(names = "--kv-decode-max-suffix", paramLabel = "TOKENS",
            defaultValue = "" + ProxyConfig.DEFAULT_KV_DECODE_MAX_SUFFIX,
            description = "kv-aware: send a prompt to a decode instance alone when the shared store holds a prefix of "
                    + "it and at most this many prompt tokens follow (D loads the prefix and computes them); 0 only "
                    + "when the store holds the whole prompt (default: ${DEFAULT-VALUE}).")
    int kvDecodeMaxSuffix;

    @Option(names = "--on-prefill-failure", defaultValue = "retry", converter = PrefillFailureChoice.class,
            description = "retry (another prefill instance) or decode-only (default: ${DEFAULT-VALUE}).")
    PrefillFailureMode onPrefillFailure;

    @Option(names = "--max-prefill-attempts", defaultValue = "3", description = "Default: ${DEFAULT-VALUE}.")
    int maxPrefillAttempts;

    @Option(names = "--max-decode-attempts", defaultValue = "3", description = "Default: ${DEFAULT-VALUE}.")
    int maxDecodeAttempts;

    @Option(names = "--connect-timeout-ms", defaultValue = "5000", description = "Default: ${DEFAULT-VALUE} ms.")
    long connectTimeoutMs;

    @Option(names = "--first-byte-timeout-ms", defaultValue = "120000",
            description = "From sending to an instance to its first byte. Default: ${DEFAULT-VALUE} ms.")
    long firstByteTimeoutMs;

    @Option(names = "--total-timeout-ms", defaultValue = "600000",
            description = "From sending to an instance to its last byte. Default: ${DEFAULT-VALUE} ms.")
    long totalTimeoutMs;

    @Option(names = "--client-idle-timeout-ms", defaultValue = "30000",
            description = "A client connection with no request in flight this long is closed. Default: ${DEFAULT-VALUE} ms.")
    long clientIdleTimeoutMs;

    @Option(names = "--max-request-bytes", defaultValue = "33554432", description = "Default: ${DEFAULT-VALUE}.")
    long maxRequestBytes;

    @Option(names = "--health-interval-ms", defaultValue = "5000",
            description = "Health probe period, 0 disables. Default: ${DEFAULT-VALUE} ms.")
    long healthIntervalMs;

    @Option(names = "--health-path", defaultValue = "/health", description = "Default: ${DEFAULT-VALUE}.")
    String healthPath;

    @Option(names = "--startup-check", defaultValue = "fail", converter = StartupCheckChoice.class,
            description = "fail, warn or off: when an instance does not serve the model. Default: ${DEFAULT-VALUE}.")
    StartupCheck startupCheck;

    @Option(names = "--prefix-chars", defaultValue = "256",
            description = "Prompt characters hashed by prefix-affinity. Default: ${DEFAULT-VALUE}.")
    int prefixChars;

    @Option(names = "--admin-key-file", paramLabel = "FILE",
            description = "File holding the admin API key (else env ADMIN_API_KEY; else admin endpoints answer 500).")
    Path adminKeyFile;

    /** The environment, replaceable by tests. */
    Map<String, String> env = System.getenv();

    @Override
    public Integer call() throws Exception {
        ProxyConfig config = toConfig();
        XpydProxy proxy = new XpydProxy(config).start();
        Thread hook = new Thread(proxy::stop, "xpyd-proxy-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            spec.commandLine().getOut().println("XpYd proxy for " + config.model() + " on " + proxy.uri());
            spec.commandLine().getOut().flush();
            proxy.awaitStop();
            return 0;
        } finally {
            proxy.stop();
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException jvmShuttingDown) {
                // The hook is running or about to: nothing left to undo.
            }
        }
    }

    /** Turns the options into a validated config; throws {@link IllegalArgumentException} naming a bad one. */
    ProxyConfig toConfig() throws IOException {
        ProxyConfig.Builder b = ProxyConfig.builder(model)
                .prefill(prefill.toArray(String[]::new))
                .decode(decode.toArray(String[]::new))
                .bindHost(host)
                .port(port)
                .flow(flow)
                .policy(policy)
                .onPrefillFailure(onPrefillFailure)
                .maxPrefillAttempts(maxPrefillAttempts)
                .maxDecodeAttempts(maxDecodeAttempts)
                .connectTimeout(Duration.ofMillis(connectTimeoutMs))
                .firstByteTimeout(Duration.ofMillis(firstByteTimeoutMs))
                .totalTimeout(Duration.ofMillis(totalTimeoutMs))
                .clientIdleTimeout(Duration.ofMillis(clientIdleTimeoutMs))
                .maxRequestBytes(maxRequestBytes)
                .healthInterval(Duration.ofMillis(healthIntervalMs))
                .healthPath(healthPath)
                .startupCheck(startupCheck)
                .prefixAffinityChars(prefixChars)
                .adminApiKey(adminKey())
                .kvTokenizer(kvTokenizer)
                .kvDecodeMaxSuffix(kvDecodeMaxSuffix);
        kvEvents.forEach(b::kvEvents);
        return b.build();
    }

    private String adminKey() throws IOException {
        if (adminKeyFile != null) {
            String key = Files.readString(adminKeyFile, StandardCharsets.UTF_8).strip();
            if (key.isEmpty()) {
                throw new IllegalArgumentException("--admin-key-file " + adminKeyFile + " is empty");
            }
            return key;
        }
        return env.get("ADMIN_API_KEY");
    }

    /** Checks {@code host:port} while parsing, so a bad address is a usage error (exit 2). */
    static final class Address implements CommandLine.ITypeConverter<String> {
        @Override
        public String convert(String value) {
            try {
                return HostPort.parse(value).toString();
            } catch (IllegalArgumentException e) {
                throw new CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }

    static final class FlowChoice implements CommandLine.ITypeConverter<ProxyFlow> {
        @Override
        public ProxyFlow convert(String value) {
            return choice(ProxyFlow.class, value);
        }
    }

    static final class PolicyChoice implements CommandLine.ITypeConverter<Policy> {
        @Override
        public Policy convert(String value) {
            return choice(Policy.class, value);
        }
    }

    static final class KvEventsChoice implements CommandLine.ITypeConverter<KvEventEndpoint> {
        @Override
        public KvEventEndpoint convert(String value) {
            try {
                return KvEventEndpoint.parse(value);
            } catch (IllegalArgumentException e) {
                throw new CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }

    static final class KvTokenizerChoice implements CommandLine.ITypeConverter<KvTokenizer> {
        @Override
        public KvTokenizer convert(String value) {
            return choice(KvTokenizer.class, value);
        }
    }

    static final class PrefillFailureChoice implements CommandLine.ITypeConverter<PrefillFailureMode> {
        @Override
        public PrefillFailureMode convert(String value) {
            return choice(PrefillFailureMode.class, value);
        }
    }

    static final class StartupCheckChoice implements CommandLine.ITypeConverter<StartupCheck> {
        @Override
        public StartupCheck convert(String value) {
            return choice(StartupCheck.class, value);
        }
    }

    /** Parses {@code decode-only} as {@code DECODE_ONLY}, naming the allowed values on a mismatch. */
    static <E extends Enum<E>> E choice(Class<E> type, String text) {
        String wanted = text.strip().replace('-', '_').toUpperCase(Locale.ROOT);
        for (E e : type.getEnumConstants()) {
            if (e.name().equals(wanted)) {
                return e;
            }
        }
        List<String> allowed = new ArrayList<>();
        for (E e : type.getEnumConstants()) {
            allowed.add(e.name().toLowerCase(Locale.ROOT).replace('_', '-'));
        }
        throw new CommandLine.TypeConversionException("'" + text + "' is not one of " + allowed);
    }
}
