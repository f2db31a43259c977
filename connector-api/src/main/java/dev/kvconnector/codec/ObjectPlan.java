package dev.kvconnector.codec;

import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.MemorySegment;

/**
 * One request's objects as an {@link ObjectCodec} lays them out, computed once per request so that the per-layer
 * path builds no strings and allocates nothing. Chunks are indexed from 0 in token order, layers from 0, tensors
 * 0 (K, or the MLA latent) and 1 (V). Every size and offset is in bytes.
 *
 * <p>Sealing and validating never throw for bad bytes: {@code validate*} return {@link #OK} or a negative status
 * that {@link #describe} names. Immutable and thread-safe.
 */
public interface ObjectPlan {
    /** The status of a valid object. */
    int OK = 0;

    /** The key plan the objects are named by. */
    KeyPlan keys();

    /** Chunks of the request. */
    int chunks();

    /**
     * Whether the plan reads its keys from {@link #keys()}'s chunks at every call rather than keeping copies, so that
     * after a {@link dev.kvconnector.key.KeyScheme#replan} of that key plan it names the new request's objects, and
     * may be reused for it. Default false.
     */
    default boolean keysFollowKeyPlan() {
        return false;
    }

    /** When the objects are complete. */
    Completion completion();

    /** Key of the object that holds layer {@code layer} of chunk {@code chunk}. */
    String layerKey(int chunk, int layer);

    /**
     * Writes {@link #layerKey(int, int)} into {@code into} and returns it. By default through the key's string;
     * a plan whose keys are derived from the chunks' hashes writes them without allocating.
     */
    default StoreKey layerKey(int chunk, int layer, StoreKey into) {
        return into.set(layerKey(chunk, layer));
    }

    /** Size of that object (for {@link Completion#PER_CHUNK}, the whole chunk object with every layer). */
    long layerObjectBytes(int chunk, int layer);

    /** Where tensor {@code tensor} of layer {@code layer} of chunk {@code chunk} lies inside its object. */
    TensorPlacement placement(int chunk, int layer, int tensor);

    /**
     * Seals a complete object whose tensors are in place: writes its header or metadata, and its checksum when
     * the plan was made with checksums on (one pass over the payload).
     */
    void seal(int chunk, int layer, MemorySegment object);

    /**
     * Whether the plan checksums each layer object's payload with a {@link dev.kvconnector.memory.WordSum} over its tensors in tensor order, so that
     * a caller may compute it while it copies the tensors in ({@link #sealWithSum}) or out
     * ({@link #verifyPayloadSum}) instead of a second pass over the payload.
     */
    boolean fusedChecksum();

    /**
     * {@link #seal} with the payload's checksum that the caller computed while it copied the tensors in, in tensor
     * order; only when {@link #fusedChecksum()}.
     */
    void sealWithSum(int chunk, int layer, MemorySegment object, int payloadSum);

    /**
     * The payload check of {@link #validate} for a caller that checked the header with {@link #validateHeader} and
     * computed the payload's checksum while it copied the tensors out, in tensor order.
     *
     * @return {@link #OK} (also for an object written without a checksum) or a negative status
     */
    int verifyPayloadSum(int chunk, int layer, MemorySegment header, int payloadSum);

    /**
     * Writes the header of an object whose payload the CPU cannot read (gathered in device memory and put from
     * there) into {@code header}, a host segment of {@link #headerBytes()} bytes, without a payload checksum.
     */
    void sealDetached(int chunk, int layer, MemorySegment header);

    /** Bytes of the header in front of each layer object's tensors; 0 for a format without one. */
    long headerBytes();

    /**
     * Checks a layer object read from a store.
     *
     * @param length the object's size as the store reported it, at most {@code object.byteSize()}
     * @return {@link #OK} or a negative status
     */
    int validate(int chunk, int layer, MemorySegment object, long length);

    /** {@link #validate} from a host copy of the object's header alone; the payload checksum cannot be checked. */
    int validateHeader(int chunk, int layer, MemorySegment header, long length);

    /** Key of chunk {@code chunk}'s hidden-state object, or null when the format keeps none. */
    String hiddenKey(int chunk);

    /**
     * Writes {@link #hiddenKey(int)}, which must exist, into {@code into} and returns it, as
     * {@link #layerKey(int, int, StoreKey)} does.
     */
    default StoreKey hiddenKey(int chunk, StoreKey into) {
        return into.set(hiddenKey(chunk));
    }

    /** Size of chunk {@code chunk}'s hidden-state object for hidden states of {@code dtype}. */
    long hiddenObjectBytes(int chunk, DType dtype);

    /** Offset of the hidden states' rows {@code [tokens, hiddenSize]} inside their object. */
    long hiddenOffset(int chunk);

    /** Seals a hidden-state object whose rows are in place. */
    void sealHidden(int chunk, DType dtype, MemorySegment object);

    /** Checks a hidden-state object read from a store; {@link #OK} or a negative status. */
    int validateHidden(int chunk, DType dtype, MemorySegment object, long length);

    /** A short description of a negative status, for a miss's detail. */
    String describe(int status);

    /** Whether {@code status} says the object was written for another layout (rather than damaged). */
    boolean isLayoutMismatch(int status);
}
