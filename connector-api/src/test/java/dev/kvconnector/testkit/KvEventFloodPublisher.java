package dev.kvconnector.testkit;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.RemovalReason;
import dev.kvconnector.events.ZmqKvEventPublisher;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * An engine's KV-event stream in a JVM of its own, to flood a subscriber from outside its process: a
 * {@link ZmqKvEventPublisher} (vLLM's wire format, with replay) on free loopback ports, driven by commands on stdin,
 * one a line, each answered with one line on stdout. Chunk {@code n}'s hash is {@link #chunkHash}{@code (n)}.
 * <ul>
 *   <li>{@code seed} stores chunks 0 to {@code window}-1: {@code SEEDED <next chunk>};</li>
 *   <li>{@code store HEX...} stores those hashes: {@code STORED <count>};</li>
 *   <li>{@code flood RATE MILLIS} publishes {@code RATE} events a second (0 for none) for {@code MILLIS} ms, what
 *       is due each millisecond, in pairs: a store of a new chunk and a removal of the chunk stored {@code window}
 *       chunks before, so the live chunks stay the last {@code window}: {@code FLOODED <events offered>
 *       <events the publisher dropped in all> <elapsed ns> <next chunk>}, the live chunks being those below
 *       {@code next} and from {@code next - window}.</li>
 * </ul>
 * Its first line is {@code READY <publish endpoint> <replay endpoint>}; it exits when its stdin closes.
 *
 * <p>Arguments: the instance name, the medium of its events ({@code GPU} for an engine's own cache, or a store URI),
 * the chunk size in tokens, the hash root (hex) and the window.
 */
public final class KvEventFloodPublisher {
    private static final HexFormat HEX = HexFormat.of();
    private final ZmqKvEventPublisher publisher;
    private final String instance;
    private final String medium;
    private final int chunkTokens;
    private final long window;
    private long sequence;
    private long next;

    private KvEventFloodPublisher(ZmqKvEventPublisher publisher, String instance, String medium, int chunkTokens,
                                  long window) {
        this.publisher = publisher;
        this.instance = instance;
        this.medium = medium;
        this.chunkTokens = chunkTokens;
        this.window = window;
    }

    /**
     * Starts one in its own JVM, with the arguments the class comment lists, and with C2 (a helper JVM otherwise runs
     * C1 alone, which cannot publish 10^5 events a second on a loaded core).
     */
    public static ChildJvm start(String instance, String medium, int chunkTokens, String rootHex, long window)
            throws IOException {
        return new ChildJvm(ChildJvm.launch(KvEventFloodPublisher.class, List.of("-Xmx256m",
                "-XX:TieredStopAtLevel=4"), List.of(instance, medium, Integer.toString(chunkTokens), rootHex,
                Long.toString(window))));
    }

    /**
     * Chunk {@code n}'s hash: 64 hex digits of a 64-bit mix of {@code n} (SplitMix64's finaliser) and its index,
     * random-looking in every digit as a SHA-256 is.
     */
    public static String chunkHash(long n) {
        long h = n * 0x9E3779B97F4A7C15L;
        StringBuilder sb = new StringBuilder(64);
        for (int i = 0; i < 4; i++) {
            h += 0x9E3779B97F4A7C15L;
            long z = h;
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            sb.append(HEX.toHexDigits(z ^ (z >>> 31)));
        }
        return sb.toString();
    }

    /** The child's main: see the class comment. */
    public static void main(String[] args) throws IOException {
        long window = Long.parseLong(args[4]);
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", "tcp://127.0.0.1:0")) {
            pub.onAttach(new KvEventSource(args[0], pub.epoch(), args[1], "kvc-v1", Integer.parseInt(args[2]),
                    args[3]));
            KvEventFloodPublisher flood = new KvEventFloodPublisher(pub, args[0], args[1], Integer.parseInt(args[2]),
                    window);
            System.out.println("READY " + pub.publishEndpoint() + " " + pub.replayEndpoint());
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                System.out.println(flood.command(line.trim().split("\\s+")));
            }
        }
    }

    private String command(String[] c) {
        return switch (c[0]) {
            case "seed" -> {
                while (next < window) {
                    stored(chunkHash(next++));
                }
                yield "SEEDED " + next;
            }
            case "store" -> {
                for (int i = 1; i < c.length; i++) {
                    stored(c[i]);
                }
                yield "STORED " + (c.length - 1);
            }
            case "flood" -> flood(Long.parseLong(c[1]), Long.parseLong(c[2]));
            default -> "ERROR unknown command '" + c[0] + "' (seed, store HEX..., flood RATE MILLIS)";
        };
    }

    private String flood(long perSecond, long millis) {
        if (next < window) {
            return "ERROR flood before seed: the window is not full";
        }
        long start = System.nanoTime();
        long offered = 0;
        for (long ms = 1; ms <= millis; ms++) {
            // Pairs owed by the end of this millisecond: any rate, 0 included (a control that floods nothing).
            long due = perSecond * ms / 1000;
            for (; offered + 2 <= due; offered += 2) {
                stored(chunkHash(next));
                publisher.onEvent(new KvEvent.Removed(1, sequence++, instance, medium, chunkHash(next - window),
                        RemovalReason.EVICTED));
                next++;
            }
            LockSupport.parkNanos(start + ms * 1_000_000L - System.nanoTime());
        }
        return "FLOODED " + offered + " " + publisher.droppedEvents() + " " + (System.nanoTime() - start) + " " + next;
    }

    private void stored(String hash) {
        publisher.onEvent(new KvEvent.Stored(1, sequence++, instance, medium, "kvc-v1", hash, null, chunkTokens, -1));
    }
}
