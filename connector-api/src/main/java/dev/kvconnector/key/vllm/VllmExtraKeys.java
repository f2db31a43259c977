package dev.kvconnector.key.vllm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.ArrayList;
import java.util.List;

/**
 * The parts of vLLM's per-block {@code extra_keys} that this port covers ({@code generate_block_hash_extra_keys}
 * in {@code vllm/v1/core/kv_cache_utils.py}): the LoRA adapter's name on every block, then the cache salt on block
 * 0 only. Multimodal items and prompt embeddings are not covered.
 *
 * @param loraName the request's {@code lora_request.lora_name}, or null without LoRA (an empty name still counts,
 *     as in vLLM)
 * @param cacheSalt the request's {@code cache_salt}, or null; an empty salt is ignored, as in vLLM
 */
public record VllmExtraKeys(String loraName, String cacheSalt) {
    /** No LoRA, no cache salt: {@code extra_keys} is {@code None} on every block. */
    public static final VllmExtraKeys NONE = new VllmExtraKeys(null, null);

    /**
     * Refuses a name or salt with an unpaired UTF-16 surrogate: Java cannot encode it as Python does
     * ({@code surrogatepass} in pickle; cbor2 refuses it), so its hash could never match vLLM's.
     */
    public VllmExtraKeys {
        requireEncodable("lora_name", loraName);
        requireEncodable("cache_salt", cacheSalt);
    }

    private static void requireEncodable(String field, String value) {
        if (value == null) {
            return;
        }
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            boolean paired = Character.isHighSurrogate(c) && i + 1 < value.length()
                    && Character.isLowSurrogate(value.charAt(i + 1));
            if (paired) {
                i++;
            } else if (Character.isSurrogate(c)) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, field + " has an unpaired UTF-16 surrogate at index " + i)
                        .hint("vLLM hashes the " + field + " as UTF-8; pass valid Unicode text").build();
            }
        }
    }

    /** The {@code extra_keys} tuple of block {@code blockIndex}, or null for Python's {@code None}. */
    public List<String> forBlock(int blockIndex) {
        List<String> keys = new ArrayList<>(2);
        if (loraName != null) {
            keys.add(loraName);
        }
        if (blockIndex == 0 && cacheSalt != null && !cacheSalt.isEmpty()) {
            keys.add(cacheSalt);
        }
        return keys.isEmpty() ? null : keys;
    }
}
