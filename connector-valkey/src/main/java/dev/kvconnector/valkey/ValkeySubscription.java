package dev.kvconnector.valkey;

import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.SubscriptionThread;
import dev.kvconnector.valkey.resp.Endpoint;
import dev.kvconnector.valkey.resp.PubSub;
import dev.kvconnector.valkey.resp.RespSettings;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A subscription to a {@code valkey://} store's events, from the server's keyspace notifications: one thread
 * ({@code kvconnector-events-valkey-N}) on a connection of its own subscribed to
 * {@code __keyevent@<db>__:set}, {@code :del} (DEL and UNLINK), {@code :expired} and {@code :evicted}; each message
 * becomes a {@link StoreEvent} of the key (the size is not told: -1). Every client's changes are told, kvconnector's
 * or not.
 *
 * <p>The server tells them only when {@code notify-keyspace-events} has the flags for them (keyevent {@code E},
 * generic {@code g}, string {@code $}, expired {@code x}, evicted {@code e}; {@code KEA} has all): at each connect
 * the setting is read, and when a flag is missing a warning names the server and the {@code CONFIG SET} to run.
 * The subscription stays, so events flow once an operator turns them on. Pub/sub delivers at most once: a lost
 * connection is reported to the error handler, retried with a back-off from {@value #FIRST_BACKOFF_MILLIS} ms
 * doubling to {@value #MAX_BACKOFF_MILLIS} ms, and once back the next event skips a sequence number, since what
 * happened meanwhile was not told. The first connection is made before {@link #start()} returns (or has failed).
 */
final class ValkeySubscription extends SubscriptionThread {
    private static final Logger LOG = LoggerFactory.getLogger(ValkeySubscription.class);
    static final long FIRST_BACKOFF_MILLIS = 100;
    static final long MAX_BACKOFF_MILLIS = 5_000;
    /** The flags the events need: keyevent channels, then generic, string, expired and evicted events. */
    static final String NEEDED_FLAGS = "Eg$xe";
    private static final String ALL_FLAGS = "g$lshzxet";

    private final String uri;
    private final Endpoint endpoint;
    private final RespSettings settings;
    private final List<String> channels;
    private final String prefix;
    private final long epoch = (System.currentTimeMillis() << 12) | ThreadLocalRandom.current().nextInt(1 << 12);
    /** Counted down once the first connection is subscribed, or failed. */
    private final CountDownLatch firstAttempt = new CountDownLatch(1);
    private volatile PubSub current;
    private long next;

    ValkeySubscription(String uri, Endpoint endpoint, RespSettings settings, StoreEventListener listener,
                       ErrorHandler errors, Consumer<SubscriptionThread> onClose) {
        super("valkey", uri, listener, errors, onClose);
        this.uri = uri;
        this.endpoint = endpoint;
        this.settings = settings;
        this.prefix = "__keyevent@" + settings.database() + "__:";
        this.channels = List.of(prefix + "set", prefix + "del", prefix + "expired", prefix + "evicted");
    }

    /**
     * Starts the thread and waits for its first connection to be subscribed, so that what changes after this returns
     * is told; when that connection fails (reported to the error handler), returns at once and keeps trying.
     */
    void start() {
        startThread();
        try {
            firstAttempt.await(settings.connectTimeoutMillis() + settings.timeoutMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The warning for a server whose {@code notify-keyspace-events} lacks a flag the events need, or null when it
     * has them all.
     *
     * @param flags the setting's value, or null when the server refused {@code CONFIG GET}
     */
    static String missingFlagsWarning(String hostPort, String flags, String uri) {
        if (flags == null) {
            return hostPort + " refused CONFIG GET notify-keyspace-events, so whether it tells keyspace events is "
                    + "unknown: subscribers of " + uri + " hear of nothing unless it has at least '" + NEEDED_FLAGS
                    + "' (CONFIG SET notify-keyspace-events KEA)";
        }
        StringBuilder missing = new StringBuilder();
        for (char c : NEEDED_FLAGS.toCharArray()) {
            boolean has = flags.indexOf(c) >= 0 || c != 'E' && flags.indexOf('A') >= 0 && ALL_FLAGS.indexOf(c) >= 0;
            if (!has) {
                missing.append(c);
            }
        }
        if (missing.isEmpty()) {
            return null;
        }
        return hostPort + " has notify-keyspace-events '" + flags + "', without '" + missing + "': subscribers of "
                + uri + " hear of " + (missing.indexOf("E") >= 0 ? "no store, removal, eviction or expiry"
                : "no " + describe(missing.toString())) + ". Run CONFIG SET notify-keyspace-events KEA on "
                + hostPort + " (or add '" + missing + "'; in the server's config file to keep it over a restart)";
    }

    private static String describe(String missing) {
        StringBuilder b = new StringBuilder();
        String[] names = {"g", "removals", "$", "stores", "x", "expiries", "e", "evictions"};
        for (int i = 0; i < names.length; i += 2) {
            if (missing.contains(names[i])) {
                b.append(b.isEmpty() ? "" : ", ").append(names[i + 1]);
            }
        }
        return b.toString();
    }

    @Override
    protected void run() {
        long backoff = FIRST_BACKOFF_MILLIS;
        boolean connectedBefore = false;
        boolean outage = false;
        String warnedFor = "";
        while (running()) {
            PubSub ps = new PubSub(endpoint, settings);
            current = ps;
            try {
                if (!running()) {
                    return;
                }
                String flags = ps.connectAndRead("notify-keyspace-events");
                String warning = missingFlagsWarning(endpoint.hostPort(), flags, uri);
                if (warning != null && !warning.equals(warnedFor)) {
                    LOG.warn(warning);
                    warnedFor = warning;
                }
                ps.subscribe(channels);
                firstAttempt.countDown();
                if (connectedBefore) {
                    // What happened while the connection was down was not told: show the gap.
                    next++;
                }
                connectedBefore = true;
                outage = false;
                backoff = FIRST_BACKOFF_MILLIS;
                while (running()) {
                    String[] message = ps.next();
                    if (message != null) {
                        deliver(message[0], message[1]);
                    }
                }
            } catch (RuntimeException e) {
                firstAttempt.countDown();
                if (!running()) {
                    return;
                }
                if (!outage) {
                    outage = true;
                    report("keyspace notifications from " + endpoint.hostPort() + " for " + uri
                            + " stopped; reconnecting", e);
                }
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(backoff));
                backoff = Math.min(MAX_BACKOFF_MILLIS, backoff * 2);
            } finally {
                ps.close();
            }
        }
    }

    private void deliver(String channel, String key) {
        if (!channel.startsWith(prefix)) {
            return;
        }
        StoreEvent.Type type = switch (channel.substring(prefix.length())) {
            case "set" -> StoreEvent.Type.STORED;
            case "del" -> StoreEvent.Type.REMOVED;
            case "expired" -> StoreEvent.Type.EXPIRED;
            case "evicted" -> StoreEvent.Type.EVICTED;
            default -> null;
        };
        if (type == null) {
            return;
        }
        deliver(new StoreEvent(epoch, next++, type, uri, key, -1));
    }

    /** Closes the connection a {@link PubSub#next()} waits on. */
    @Override
    protected void wake() {
        PubSub ps = current;
        if (ps != null) {
            ps.close();
        }
    }
}
