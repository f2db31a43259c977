package dev.kvconnector.proxy;

import java.util.Objects;

/**
 * Where one engine publishes its KV events: {@code instance} is its {@code host:port} as given to
 * {@code --prefill}/{@code --decode}, {@code publish} its ZMQ PUB endpoint ({@code tcp://host:5557}) and
 * {@code replay} its ROUTER endpoint for replays and snapshots ({@code tcp://host:5558}), or null.
 */
public record KvEventEndpoint(String instance, String publish, String replay) {
    /** Checks the fields. */
    public KvEventEndpoint {
        HostPort.parse(instance);
        Objects.requireNonNull(publish, "publish");
        if (!publish.startsWith("tcp://") && !publish.startsWith("ipc://") && !publish.startsWith("inproc://")) {
            throw new IllegalArgumentException("KV event endpoint of " + instance + " is " + publish
                    + " (need tcp://host:port, ipc:// or inproc://)");
        }
    }

    /** Parses {@code host:port=tcp://pub[,tcp://replay]}, the form of {@code --kv-events}. */
    public static KvEventEndpoint parse(String spec) {
        int eq = spec.indexOf('=');
        if (eq < 0) {
            throw new IllegalArgumentException("--kv-events " + spec + ": need INSTANCE=PUB_ENDPOINT[,REPLAY_ENDPOINT],"
                    + " for example 10.0.0.5:8100=tcp://10.0.0.5:5557,tcp://10.0.0.5:5558");
        }
        String[] ends = spec.substring(eq + 1).split(",", -1);
        if (ends.length > 2) {
            throw new IllegalArgumentException("--kv-events " + spec + ": at most a publish and a replay endpoint");
        }
        return new KvEventEndpoint(spec.substring(0, eq), ends[0], ends.length == 2 ? ends[1] : null);
    }
}
