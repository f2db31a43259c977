package dev.kvconnector.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import org.bouncycastle.crypto.digests.Blake2bDigest;

/**
 * vLLM V0 {@code MooncakeStoreConnector}'s keys, so that kvconnector can share a Mooncake store with vLLM V0
 * instances: one object per request holding every layer, and one hidden-state object.
 *
 * <p>The key is BLAKE2b-512 over the prompt tokens as int64 little-endian; the first 8 digest bytes, read as an
 * unsigned big-endian integer in decimal, form {@code "{hash}_{tpRank}"} (KV) and {@code "{hash}_hidden_{tpRank}"}
 * (hidden states). The key binds neither the model nor the layout nor the TP size, so every instance on one store
 * must serve the same model with the same TP size, and the 64-bit truncation can collide. Prefer {@code kvc-v1}
 * unless vLLM V0 peers read or write the same store.
 *
 * <p>This scheme needs the prompt tokens; engine chunk hashes are refused. It also refuses a namespace, because
 * vLLM V0 keys have no place for one and ignoring it would let two transfers of one prompt overwrite each other.
 */
public final class VllmV0KeyScheme implements KeyScheme {
    /** This scheme's name. */
    public static final String NAME = "vllm-v0";

    private static final int DIGEST_BITS = 512;
    private static final int TRUNCATED_HASH_BYTES = 8;
    private static final int TOKENS_PER_UPDATE = 512;
    /** The BouncyCastle class this scheme hashes with; BouncyCastle is an optional dependency of connector-api. */
    static final String BLAKE2B_CLASS = "org.bouncycastle.crypto.digests.Blake2bDigest";

    /** Creates the scheme; it holds no state. */
    public VllmV0KeyScheme() {
    }

    @Override
    public String name() {
        return NAME;
    }

    /** vLLM V0 keys hold no request namespace. */
    @Override
    public boolean bindsNamespace() {
        return false;
    }

    @Override
    public Granularity granularity() {
        return Granularity.WHOLE_REQUEST;
    }

    @Override
    public KeyPlan plan(KeyContext context, RequestTokens request) {
        Objects.requireNonNull(context, "context");
        Objects.requireNonNull(request, "request");
        if (!request.hasTokens()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT,
                            "key scheme vllm-v0 hashes the prompt tokens, but this request carries only engine chunk hashes")
                    .operation("plan")
                    .hint("pass RequestTokens.of(promptTokens), or use kvc-v1 or lmcache-v0, which accept engine chunk hashes")
                    .build();
        }
        if (request.namespace() != null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "key scheme vllm-v0 cannot honour namespace '"
                            + request.namespace() + "': vLLM V0 keys hold only the prompt hash and the TP rank")
                    .operation("plan")
                    .hint("drop the namespace for vLLM V0 interop, or use kvc-v1, whose keys bind the namespace")
                    .build();
        }
        requireClass(BLAKE2B_CLASS);
        byte[] digest = blake2b512(request);
        long truncated = 0;
        for (int i = 0; i < TRUNCATED_HASH_BYTES; i++) {
            truncated = (truncated << 8) | (digest[i] & 0xFF);
        }
        String hash = Long.toUnsignedString(truncated);
        String kvKey = hash + "_" + context.tpRank();
        String hiddenKey = hash + "_hidden_" + context.tpRank();
        ChunkKeys whole = new ChunkKeys(0, 0, request.totalTokens(), HexFormat.of().formatHex(digest),
                new String[] {kvKey}, hiddenKey, null);
        return new KeyPlan(NAME, Granularity.WHOLE_REQUEST, List.of(whole));
    }

    /** Throws {@link #blake2bMissing} when {@code className} cannot be loaded. */
    static void requireClass(String className) {
        try {
            Class.forName(className, false, VllmV0KeyScheme.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            throw blake2bMissing(className);
        }
    }

    /** The error for an application that uses vllm-v0 keys without BouncyCastle on its class path. */
    static KVException blake2bMissing(String className) {
        return KVException.of(ErrorCode.INVALID_CONFIG, "key scheme vllm-v0 hashes prompts with BLAKE2b from "
                        + "BouncyCastle, and " + className + " is not on the class path")
                .operation("plan")
                .hint("add the dependency org.bouncycastle:bcprov-jdk18on (1.82 or later) to your application: "
                        + "connector-api declares it optional, since only vllm-v0 keys need it")
                .build();
    }

    /**
     * BLAKE2b-512 of the tokens as int64 little-endian, as vLLM's {@code tensor_hash} computes it. The JDK ships no
     * BLAKE2b, so this uses BouncyCastle's {@link Blake2bDigest}, a maintained implementation already on the class
     * path; tokens are fed in bounded slices so a long prompt needs no prompt-sized buffer.
     */
    private static byte[] blake2b512(RequestTokens request) {
        Blake2bDigest blake = new Blake2bDigest(DIGEST_BITS);
        int total = request.totalTokens();
        byte[] slice = new byte[Long.BYTES * Math.min(total, TOKENS_PER_UPDATE)];
        int count;
        for (int start = 0; start < total; start += count) {
            count = Math.min(TOKENS_PER_UPDATE, total - start);
            int pos = 0;
            for (int t = start; t < start + count; t++) {
                long token = request.token(t);
                for (int b = 0; b < Long.BYTES; b++) {
                    slice[pos++] = (byte) (token >>> (8 * b));
                }
            }
            blake.update(slice, 0, pos);
        }
        byte[] out = new byte[blake.getDigestSize()];
        blake.doFinal(out, 0);
        return out;
    }
}
