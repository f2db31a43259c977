package dev.kvconnector.connector;

import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import java.lang.foreign.MemorySegment;
import dev.kvconnector.memory.WordSum;

/**
 * A host paged KV cache read or written through one request's slots (a block table or a slot mapping): both a
 * {@link LayerSource} and a {@link LayerSink}.
 *
 * @param cache the paged cache
 * @param slots the request's slots, covering at least its tokens
 */
public record PagedLayers(PagedKVCache cache, TokenSlots slots) implements HostLayerSource, HostLayerSink {
    @Override
    public void check(KVLayout layout, int tokens, String op, String endpoint) {
        LayerChecks.paged("paged cache", cache.layout(), slots, layout, tokens, op, endpoint);
    }

    @Override
    public void gather(int layer, int tensor, int from, int to, MemorySegment dst, long dstOffset) {
        cache.gather(layer, tensor, slots, from, to, dst, dstOffset);
    }

    @Override
    public void gather(int layer, int tensor, int from, int to, MemorySegment dst, long dstOffset, WordSum sum) {
        cache.gather(layer, tensor, slots, from, to, dst, dstOffset, sum);
    }

    @Override
    public void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to) {
        cache.scatter(src, srcOffset, layer, tensor, slots, from, to);
    }

    @Override
    public void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to, WordSum sum) {
        cache.scatter(src, srcOffset, layer, tensor, slots, from, to, sum);
    }
}
