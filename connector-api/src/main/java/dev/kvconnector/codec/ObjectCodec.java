package dev.kvconnector.codec;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.layout.KVLayout;

/**
 * How a request's KV and hidden states become stored objects: for each chunk and layer, which object holds them,
 * where each tensor lies inside it ({@link TensorPlacement}), and when an object is complete ({@link Completion}) so
 * that it can be sealed and put. A {@link KeyScheme} names the objects; a codec lays out their bytes; the two form a
 * pair of the same {@link Granularity}, checked once by {@link #requirePair}.
 *
 * <p>Formats it describes: kvconnector's raw per-layer objects ({@link RawLayerCodec}: one object per chunk and
 * layer, a 64-byte header with a CRC32C and a payload checksum); LMCache chunk objects (one object per chunk
 * holding every layer, in the 2024 {@code vllm}/{@code huggingface} layouts or v1 {@code KV_2LTD}/{@code KV_MLA}
 * with its metadata, where a {@code huggingface} tensor is not contiguous by token: its placement has a head
 * stride); vLLM V0 safetensors (one object per request, planned as one chunk, with a JSON header written once every
 * layer is in).
 *
 * <p>Implementations are immutable and thread-safe; {@link #plan} runs once per request.
 */
public interface ObjectCodec {
    /** The codec's name, as configuration names it (for example {@code kvc-raw}). */
    String name();

    /** The key granularity whose objects this codec lays out. */
    Granularity granularity();

    /** When this codec's objects are complete. */
    Completion completion();

    /**
     * Plans one request's objects.
     *
     * @param keys the key scheme's plan for the request (its granularity is this codec's)
     * @param layout the model's KV layout
     * @param checksums whether sealed objects carry a checksum of their payload (where the format has one)
     */
    ObjectPlan plan(KeyPlan keys, KVLayout layout, boolean checksums);

    /**
     * Checks, once when a connector is built, that the store at {@code storeUri} (masked) keeps this codec's objects
     * as the format's other readers expect them. By default every store does.
     *
     * @throws KVException {@link ErrorCode#INVALID_ARGUMENT} naming the store and the likely fix
     */
    default void requireStore(String storeUri) {
    }

    /**
     * Tokens per chunk for this codec's objects, given the configured chunk size: the configured one for codecs
     * whose objects take any; a codec whose objects hold a fixed number of tokens returns that number.
     */
    default int chunkTokens(KVLayout layout, int configured) {
        return configured;
    }

    /** Whether this codec's plans lay out hidden-state objects ({@link ObjectPlan#hiddenKey} is not null). */
    default boolean holdsHiddenStates() {
        return true;
    }

    /**
     * Checks that {@code codec} lays out the objects that {@code scheme} names.
     *
     * @throws KVException {@link ErrorCode#UNSUPPORTED} naming both, their granularities and the likely fix
     */
    static void requirePair(KeyScheme scheme, ObjectCodec codec) {
        if (scheme.granularity() != codec.granularity()) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "key scheme " + scheme.name() + " names "
                    + scheme.granularity() + " objects but codec " + codec.name() + " lays out "
                    + codec.granularity() + " objects").operation("connect")
                    .hint("pair the key scheme with a codec of the same granularity (kvc-v1 with "
                            + RawLayerCodec.NAME + ")").build();
        }
    }
}
