package dev.kvconnector.codec;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.MemorySegment;

/**
 * An {@link ObjectPlan} of a format whose objects hold KV alone, with no checksum and no hidden states (LMCache's
 * chunk objects, vLLM V1's blocks): it answers those parts of the plan once, naming the format in its errors.
 */
public interface KvOnlyPlan extends ObjectPlan {
    /** The format's objects, for messages, such as {@code "vLLM V1 values"}. */
    String objectsName();

    /** These objects carry no checksum. */
    @Override
    default boolean fusedChecksum() {
        return false;
    }

    @Override
    default void sealWithSum(int chunk, int layer, MemorySegment object, int payloadSum) {
        throw KVException.of(ErrorCode.UNSUPPORTED, objectsName() + " carry no checksum").build();
    }

    /** {@inheritDoc} Always {@link #OK}: there is no checksum to compare. */
    @Override
    default int verifyPayloadSum(int chunk, int layer, MemorySegment header, int payloadSum) {
        return OK;
    }

    /** Null: no hidden-state objects. */
    @Override
    default String hiddenKey(int chunk) {
        return null;
    }

    @Override
    default long hiddenObjectBytes(int chunk, DType dtype) {
        throw noHiddenStates();
    }

    @Override
    default long hiddenOffset(int chunk) {
        throw noHiddenStates();
    }

    @Override
    default void sealHidden(int chunk, DType dtype, MemorySegment object) {
        throw noHiddenStates();
    }

    @Override
    default int validateHidden(int chunk, DType dtype, MemorySegment object, long length) {
        throw noHiddenStates();
    }

    private KVException noHiddenStates() {
        return KVException.of(ErrorCode.UNSUPPORTED, objectsName() + " hold no hidden states").build();
    }
}
