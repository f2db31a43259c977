package dev.kvconnector.demo;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Locale;

/** What an engine does with the KV store, as vLLM's {@code kv_role}. */
public enum KVRole {
    /** Computes prefills and inserts their KV and hidden states ({@code kv_producer}). */
    PRODUCER,
    /** Loads prefills from the store and decodes; recomputes on a miss ({@code kv_consumer}). */
    CONSUMER,
    /** Loads when it can, otherwise computes and inserts ({@code kv_both}). */
    BOTH,
    /** Ignores the store: a plain engine. */
    NONE;

    /** Whether this role inserts computed prefills. */
    public boolean produces() {
        return this == PRODUCER || this == BOTH;
    }

    /** Whether this role tries the store before computing a prefill. */
    public boolean consumes() {
        return this == CONSUMER || this == BOTH;
    }

    /** vLLM's name: {@code kv_producer}, {@code kv_consumer}, {@code kv_both}, or {@code none}. */
    public String vllmName() {
        return this == NONE ? "none" : "kv_" + name().toLowerCase(Locale.ROOT);
    }

    /** Parses {@code producer}, {@code kv_producer} and so on (any case); anything else is an error. */
    public static KVRole parse(String s) {
        String n = s == null ? "" : s.trim().toLowerCase(Locale.ROOT);
        n = n.startsWith("kv_") ? n.substring(3) : n;
        for (KVRole r : values()) {
            if (r.name().toLowerCase(Locale.ROOT).equals(n)) {
                return r;
            }
        }
        throw KVException.of(ErrorCode.INVALID_CONFIG, "unknown KV role '" + s + "'")
                .hint("use one of kv_producer, kv_consumer, kv_both, none").build();
    }
}
