package dev.kvconnector.connector;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.store.StoreUri;
import java.util.Locale;

/**
 * The settings of a {@link StoreConnector}, each a {@code PROP_NAME}/{@code DEFAULT} pair as in Aeron's
 * {@code Configuration}: the builder starts from the system property when it is set, else from the default, and
 * anything set on the builder wins. Every accessor reads the property when called, and an unreadable value is an
 * {@code INVALID_CONFIG} error naming the property and the value.
 */
public final class ConnectorConfiguration {
    /** Key scheme by name. */
    public static final String KEY_SCHEME_PROP_NAME = "kvc.connector.key.scheme";
    /** {@value}. */
    public static final String KEY_SCHEME_DEFAULT = KeySchemes.DEFAULT;
    /** Tokens per chunk, the granularity of prefix matching. */
    public static final String CHUNK_TOKENS_PROP_NAME = "kvc.connector.chunk.tokens";
    /** {@value} tokens. */
    public static final int CHUNK_TOKENS_DEFAULT = KeyContext.DEFAULT_CHUNK_TOKENS;
    /** {@code consume} or {@code retain} after a drop-select. */
    public static final String DROP_MODE_PROP_NAME = "kvc.connector.drop.mode";
    /** Consume. */
    public static final DropMode DROP_MODE_DEFAULT = DropMode.CONSUME;
    /** Time to live of stored objects in ms; 0 leaves it to the store. */
    public static final String TTL_MS_PROP_NAME = "kvc.connector.ttl.ms";
    /** {@value} ms. */
    public static final long TTL_MS_DEFAULT = 0;
    /** Whether layer objects carry a checksum of their payload. */
    public static final String CHECKSUMS_PROP_NAME = "kvc.connector.checksums";
    /** {@value}. */
    public static final boolean CHECKSUMS_DEFAULT = true;
    /** Bound of the staging pool (and of a device staging pool), as a size such as {@code 1GiB}. */
    public static final String STAGING_BYTES_PROP_NAME = "kvc.connector.staging.bytes";
    /** 1 GiB. */
    public static final long STAGING_BYTES_DEFAULT = 1L << 30;
    /** Threads that run layer puts; 0 puts on the caller's thread; -1 chooses by the store (see the builder). */
    public static final String IO_THREADS_PROP_NAME = "kvc.connector.io.threads";
    /** {@value}: inline for local-memory stores, 2 threads for any other. */
    public static final int IO_THREADS_DEFAULT = -1;
    /** How long a layer-wise drop-select waits in total for the producer, in ms. */
    public static final String LAYER_TIMEOUT_MS_PROP_NAME = "kvc.connector.layer.timeout.ms";
    /** {@value} ms. */
    public static final long LAYER_TIMEOUT_MS_DEFAULT = 10_000;
    /** The name this connector's KV events carry as their instance; by default {@code <pid>@<host name>}. */
    public static final String INSTANCE_PROP_NAME = "kvc.connector.instance";

    private ConnectorConfiguration() {
    }

    /** {@link #KEY_SCHEME_PROP_NAME} or its default. */
    public static String keyScheme() {
        return System.getProperty(KEY_SCHEME_PROP_NAME, KEY_SCHEME_DEFAULT);
    }

    /** {@link #INSTANCE_PROP_NAME}, or by default {@code <pid>@<host name>}. */
    public static String instance() {
        String set = System.getProperty(INSTANCE_PROP_NAME);
        if (set != null) {
            return set;
        }
        String host;
        try {
            host = java.net.InetAddress.getLocalHost().getHostName();
        } catch (java.net.UnknownHostException e) {
            host = "localhost";
        }
        return ProcessHandle.current().pid() + "@" + host;
    }

    /** {@link #CHUNK_TOKENS_PROP_NAME} or its default. */
    public static int chunkTokens() {
        return (int) number(CHUNK_TOKENS_PROP_NAME, CHUNK_TOKENS_DEFAULT, Integer.MAX_VALUE);
    }

    /** {@link #DROP_MODE_PROP_NAME} or its default. */
    public static DropMode dropMode() {
        String v = System.getProperty(DROP_MODE_PROP_NAME);
        if (v == null) {
            return DROP_MODE_DEFAULT;
        }
        try {
            return DropMode.valueOf(v.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw invalid(DROP_MODE_PROP_NAME, v, "consume or retain");
        }
    }

    /** {@link #TTL_MS_PROP_NAME} or its default. */
    public static long ttlMillis() {
        return number(TTL_MS_PROP_NAME, TTL_MS_DEFAULT, Long.MAX_VALUE);
    }

    /** {@link #CHECKSUMS_PROP_NAME} or its default. */
    public static boolean checksums() {
        String v = System.getProperty(CHECKSUMS_PROP_NAME);
        if (v == null) {
            return CHECKSUMS_DEFAULT;
        }
        return switch (v.trim().toLowerCase(Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw invalid(CHECKSUMS_PROP_NAME, v, "true or false");
        };
    }

    /** {@link #STAGING_BYTES_PROP_NAME} or its default. */
    public static long stagingBytes() {
        String v = System.getProperty(STAGING_BYTES_PROP_NAME);
        if (v == null) {
            return STAGING_BYTES_DEFAULT;
        }
        try {
            return StoreUri.parseSize(STAGING_BYTES_PROP_NAME, v, "-D" + STAGING_BYTES_PROP_NAME);
        } catch (KVException e) {
            throw invalid(STAGING_BYTES_PROP_NAME, v, "a size such as 1GiB, 512MiB or 1048576");
        }
    }

    /** {@link #IO_THREADS_PROP_NAME} or its default. */
    public static int ioThreads() {
        String v = System.getProperty(IO_THREADS_PROP_NAME);
        if (v != null && v.trim().equals("-1")) {
            return -1;
        }
        return (int) number(IO_THREADS_PROP_NAME, IO_THREADS_DEFAULT, 4096);
    }

    /** {@link #LAYER_TIMEOUT_MS_PROP_NAME} or its default. */
    public static long layerTimeoutMillis() {
        return number(LAYER_TIMEOUT_MS_PROP_NAME, LAYER_TIMEOUT_MS_DEFAULT, Long.MAX_VALUE);
    }

    private static long number(String prop, long def, long max) {
        String v = System.getProperty(prop);
        if (v == null) {
            return def;
        }
        try {
            long n = Long.parseLong(v.trim());
            if (n < 0 || n > max) {
                throw invalid(prop, v, "a whole number from 0 to " + max);
            }
            return n;
        } catch (NumberFormatException e) {
            throw invalid(prop, v, "a whole number from 0 to " + max);
        }
    }

    private static KVException invalid(String prop, String value, String want) {
        return KVException.of(ErrorCode.INVALID_CONFIG, "system property " + prop + "=" + value + " is not " + want)
                .operation("configure").hint("fix or unset -D" + prop).build();
    }
}
