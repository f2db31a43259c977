package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;
import dev.kvconnector.memory.WordSum;

/** A {@link LayerSource} in host memory: the connector copies each chunk's tensors straight out of it. */
public interface HostLayerSource extends LayerSource {
    /**
     * Copies tokens {@code [from, to)} of tensor {@code tensor} (0 K or the latent, 1 V) of layer {@code layer},
     * {@code [to - from, kvHeads, headSize]} contiguous, into {@code dst} at byte offset {@code dstOffset}.
     */
    void gather(int layer, int tensor, int from, int to, MemorySegment dst, long dstOffset);

    /** {@link #gather} that also adds the copied bytes to {@code sum}, in their order in {@code dst}, in one pass. */
    void gather(int layer, int tensor, int from, int to, MemorySegment dst, long dstOffset, WordSum sum);

    @Override
    default void insert(InsertChannel channel, int first, int count) {
        for (int l = first; l < first + count; l++) {
            channel.putHost(l, this);
        }
    }
}
