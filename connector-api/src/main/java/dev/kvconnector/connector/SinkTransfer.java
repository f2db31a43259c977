package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;
import dev.kvconnector.memory.WordSum;

/**
 * One drop-select's writes into a {@link LayerSink}, layer by layer, from the objects the connector has read and
 * validated. A sink either takes a layer from host staging ({@link #fromHost}) or, when {@link #direct()}, has the
 * store read the layer straight into its own memory ({@link #acquireLayer}, then {@link #fromDirect}). Used by one
 * thread; {@link #close()} releases what it holds.
 */
public interface SinkTransfer extends AutoCloseable {
    /**
     * Writes the first {@code chunks} chunks of layer {@code layer} from {@code staging}, laid out as
     * {@link ChunkGeometry} says; returns when the sink holds them.
     */
    void fromHost(int layer, MemorySegment staging, int chunks);

    /**
     * Whether the sink takes one chunk's object at a time from wherever it lies ({@link #fromObject}), for example
     * from a store's in-place view; false for a sink that needs a whole layer in host staging.
     */
    default boolean takesObjects() {
        return false;
    }

    /**
     * Writes chunk {@code chunk}'s tensors of layer {@code layer} from {@code object} (a layer object whose header
     * was found valid), adding the payload to {@code sum} in tensor order as it copies; only when
     * {@link #takesObjects()}.
     */
    default void fromObject(int layer, int chunk, MemorySegment object, WordSum sum) {
        throw new UnsupportedOperationException("this sink takes whole layers");
    }

    /** Whether the store reads layers straight into this sink's own buffers (for example GPUDirect). */
    default boolean direct() {
        return false;
    }

    /** A buffer for one layer's objects, laid out as {@link ChunkGeometry} says; only when {@link #direct()}. */
    default MemorySegment acquireLayer() {
        throw new UnsupportedOperationException("not a direct sink");
    }

    /** Copies the first {@code chunks} objects' headers of a direct buffer into host {@code headers}, back to back. */
    default void copyHeaders(MemorySegment layerBuffer, MemorySegment headers, int chunks) {
        throw new UnsupportedOperationException("not a direct sink");
    }

    /** Writes the first {@code chunks} validated objects of a direct buffer into the sink; returns when done. */
    default void fromDirect(int layer, MemorySegment layerBuffer, int chunks) {
        throw new UnsupportedOperationException("not a direct sink");
    }

    /** Gives back a buffer from {@link #acquireLayer}. */
    default void release(MemorySegment layerBuffer) {
        throw new UnsupportedOperationException("not a direct sink");
    }

    @Override
    void close();
}
