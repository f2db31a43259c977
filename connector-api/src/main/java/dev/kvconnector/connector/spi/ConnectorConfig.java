package dev.kvconnector.connector.spi;

import dev.kvconnector.config.KvTransferConfig;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * One connector's {@code kv_transfer_config} and where it sits in the configuration the user wrote (its path, such
 * as {@code kv_transfer_config.kv_connector_extra_config.connectors[1]}), with strict reads of its
 * {@code kv_connector_extra_config}: every error is {@link ErrorCode#INVALID_CONFIG} (or the cause's code, for a URI)
 * and names the field by its whole path. String values are never echoed, since a store URI may hold credentials.
 *
 * @param config the connector's {@code kv_transfer_config}
 * @param path where {@code config} sits, for messages
 */
public record ConnectorConfig(KvTransferConfig config, String path) {
    /** The path of a top-level config. */
    public static final String ROOT = "kv_transfer_config";
    private static final String EXTRA = "kv_connector_extra_config";

    /** A top-level config, at {@value #ROOT}. */
    public static ConnectorConfig root(KvTransferConfig config) {
        return new ConnectorConfig(config, ROOT);
    }

    /** The config of element {@code index} of the list at {@code kv_connector_extra_config.key}. */
    public ConnectorConfig child(String key, int index, KvTransferConfig child) {
        return new ConnectorConfig(child, field(key) + "[" + index + "]");
    }

    /** The whole path of {@code kv_connector_extra_config.key}. */
    public String field(String key) {
        return path + "." + EXTRA + "." + key;
    }

    /** The {@code kv_connector} name. */
    public String name() {
        return config.kvConnector();
    }

    /**
     * Refuses keys of {@code kv_connector_extra_config} outside {@code known}, so that a misspelt setting is never
     * silently ignored.
     */
    public void rejectUnknown(Set<String> known) {
        for (String k : config.kvConnectorExtraConfig().keySet()) {
            if (!known.contains(k)) {
                throw invalid(k, "is not a setting of " + name() + "; its settings are "
                        + String.join(", ", new TreeSet<>(known)));
            }
        }
    }

    /** A string setting, or {@code defaultValue} when absent. */
    public String string(String key, String defaultValue) {
        Object v = config.extraConfig(key, null);
        if (v == null) {
            return defaultValue;
        }
        if (!(v instanceof String s) || s.isBlank()) {
            throw invalid(key, "must be a non-empty string, got " + describe(v));
        }
        return s;
    }

    /** A required string setting; {@code what} says what it holds, for the error when it is missing. */
    public String requireString(String key, String what) {
        String s = string(key, null);
        if (s == null) {
            throw invalid(key, "is missing: " + name() + " needs " + what);
        }
        return s;
    }

    /** An integer setting of at least {@code min}, or {@code defaultValue} when absent. */
    public long longValue(String key, long defaultValue, long min) {
        Object v = config.extraConfig(key, null);
        if (v == null) {
            return defaultValue;
        }
        boolean isLong = v instanceof Long || v instanceof Integer || v instanceof BigInteger b && b.bitLength() < 64;
        if (!isLong || ((Number) v).longValue() < min) {
            throw invalid(key, "must be an integer >= " + min + ", got " + describe(v));
        }
        return ((Number) v).longValue();
    }

    /** An {@code int} setting of at least {@code min}, or {@code defaultValue} when absent. */
    public int intValue(String key, int defaultValue, int min) {
        long v = longValue(key, defaultValue, min);
        if (v > Integer.MAX_VALUE) {
            throw invalid(key, "must be at most " + Integer.MAX_VALUE + ", got " + v);
        }
        return (int) v;
    }

    /** One of {@code choices}, or {@code defaultValue} when absent. */
    public String choice(String key, String defaultValue, List<String> choices) {
        String s = string(key, defaultValue);
        if (s != null && !choices.contains(s)) {
            throw invalid(key, "must be one of " + String.join(", ", choices));
        }
        return s;
    }

    /** An {@link ErrorCode#INVALID_CONFIG} error naming {@code kv_connector_extra_config.key}. */
    public KVException invalid(String key, String detail) {
        return KVException.of(ErrorCode.INVALID_CONFIG, field(key) + " " + detail).operation("configure connector")
                .build();
    }

    /**
     * {@code cause} (a URI or a setting that did not open) with the field it came from named in front, its code and
     * hint kept.
     */
    public KVException wrap(String key, KVException cause) {
        return KVException.of(cause.code(), field(key) + ": " + cause.getMessage()).operation("configure connector")
                .cause(cause).build();
    }

    /** {@code cause}, from building the connector, with this config's path and name in front; its code kept. */
    public KVException wrap(KVException cause) {
        return KVException.of(cause.code(), path + " (" + name() + "): " + cause.getMessage())
                .operation("configure connector").cause(cause).build();
    }

    /** Describes a value's type, never a string's content. */
    static String describe(Object v) {
        return switch (v) {
            case String _ -> "a string";
            case Map<?, ?> _ -> "an object";
            case List<?> _ -> "a list";
            default -> v.toString();
        };
    }
}
