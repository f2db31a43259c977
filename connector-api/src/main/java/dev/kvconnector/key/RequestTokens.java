package dev.kvconnector.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * What identifies a request's KV: its prompt token ids, or chunk hashes that the engine computed (for example
 * vLLM's block hashes), and an optional namespace (such as the proxy's transfer id) that isolates one transfer's
 * objects from another request with the same prompt.
 */
public final class RequestTokens {
    private final int[] tokens;
    private final String[] chunkHashes;
    private final int chunkHashTokens;
    private final int totalTokens;
    private final String namespace;

    private RequestTokens(int[] tokens, String[] chunkHashes, int chunkHashTokens, int totalTokens, String namespace) {
        this.tokens = tokens;
        this.chunkHashes = chunkHashes;
        this.chunkHashTokens = chunkHashTokens;
        this.totalTokens = totalTokens;
        this.namespace = namespace;
    }

    /** A request identified by its prompt tokens. The array is copied. */
    public static RequestTokens of(int... tokens) {
        if (tokens == null || tokens.length == 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a request needs at least one token").build();
        }
        return new RequestTokens(tokens.clone(), null, 0, tokens.length, null);
    }

    /**
     * A request identified by engine-supplied chunk hashes: hash {@code i} covers tokens
     * {@code [i*chunkTokens, min((i+1)*chunkTokens, totalTokens))}.
     */
    public static RequestTokens ofChunkHashes(String[] hashes, int chunkTokens, int totalTokens) {
        if (hashes == null || hashes.length == 0 || chunkTokens < 1
                || (long) (hashes.length - 1) * chunkTokens >= totalTokens || (long) hashes.length * chunkTokens < totalTokens) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, (hashes == null ? 0 : hashes.length) + " chunk hashes of "
                    + chunkTokens + " tokens cannot cover " + totalTokens + " tokens").build();
        }
        return new RequestTokens(null, hashes.clone(), chunkTokens, totalTokens, null);
    }

    /** This request within a namespace (for example a transfer id); keys of different namespaces never collide. */
    public RequestTokens inNamespace(String ns) {
        return new RequestTokens(tokens, chunkHashes, chunkHashTokens, totalTokens, ns);
    }

    /** The prompt tokens (a copy), or null when identified by chunk hashes. */
    public int[] tokens() {
        return tokens == null ? null : tokens.clone();
    }

    /** Token {@code i}; only for token-identified requests. */
    public int token(int i) {
        return tokens[i];
    }

    /** Whether this request carries tokens (rather than chunk hashes). */
    public boolean hasTokens() {
        return tokens != null;
    }

    /** The engine's chunk hashes (a copy), or null. */
    public String[] chunkHashes() {
        return chunkHashes == null ? null : chunkHashes.clone();
    }

    /** Tokens per engine-supplied chunk hash, or 0. */
    public int chunkHashTokens() {
        return chunkHashTokens;
    }

    /** The number of prompt tokens. */
    public int totalTokens() {
        return totalTokens;
    }

    /** The namespace, or null. */
    public String namespace() {
        return namespace;
    }
}
