package dev.kvconnector.lmcache.protocol;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Locale;

/**
 * The two versions of the LMCache server protocol. They share commands, codes and the key field, and differ in
 * the header sizes (in bytes) and the tensor metadata that v1 carries.
 */
public enum LmProtocolVersion {
    /** The 2024 server ({@code python -m lmcache.server}): request {@code command, length, key[150]}. */
    V0(4 * 2 + LmWire.KEY_BYTES, 4 * 2),
    /**
     * The v1 server ({@code python -m lmcache.v1.server}): request
     * {@code command, length, fmt, dtype, location, shape0..3, key[150]}; reply
     * {@code code, length, fmt, dtype, shape0..3, location}.
     */
    V1(4 * 9 + LmWire.KEY_BYTES, 4 * 9);

    private final int requestHeaderBytes;
    private final int replyHeaderBytes;

    LmProtocolVersion(int requestHeaderBytes, int replyHeaderBytes) {
        this.requestHeaderBytes = requestHeaderBytes;
        this.replyHeaderBytes = replyHeaderBytes;
    }

    /** Size of a request header in bytes: 158 for v0, 186 for v1. */
    public int requestHeaderBytes() {
        return requestHeaderBytes;
    }

    /** Size of a reply header in bytes: 8 for v0, 36 for v1. */
    public int replyHeaderBytes() {
        return replyHeaderBytes;
    }

    /** Whether this version serves {@link LmWire#LIST} (v0 only). */
    public boolean servesList() {
        return this == V0;
    }

    /** Whether this version serves {@link LmWire#HEALTH} (v1 only). */
    public boolean servesHealth() {
        return this == V1;
    }

    /** The lower-case name used in URIs and on the command line: {@code v0} or {@code v1}. */
    public String label() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** Parses {@code v0} or {@code v1} (any case); anything else is an {@link ErrorCode#INVALID_ARGUMENT} error. */
    public static LmProtocolVersion parse(String text) {
        if (text != null) {
            switch (text.trim().toLowerCase(Locale.ROOT)) {
                case "v0", "0", "2024" -> {
                    return V0;
                }
                case "v1", "1" -> {
                    return V1;
                }
                default -> {
                }
            }
        }
        throw KVException.of(ErrorCode.INVALID_ARGUMENT, "unknown LMCache protocol version '" + text + "'")
                .hint("use v0 for the 2024 server (python -m lmcache.server) or v1 for python -m lmcache.v1.server")
                .build();
    }
}
