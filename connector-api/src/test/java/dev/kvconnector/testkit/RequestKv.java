package dev.kvconnector.testkit;

import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.BitSet;

/**
 * One request's KV in {@link KVStoreConnectorContract}: the producer's paged cache with seeded random bytes at a
 * shuffled block table, the consumer's shuffled blocks it must land in, and the hidden states (fp32,
 * {@code [tokens, hiddenSize]}) when the pair carries them. Checks that every byte arrived and that nothing else of
 * the destination changed.
 */
final class RequestKv implements AutoCloseable {
    /** What every byte of a destination cache holds before a test writes into it. */
    static final byte UNTOUCHED = 0x5A;

    private final KVLayout layout;
    private final RequestTokens request;
    private final PagedKVCache source;
    private final BlockTable sourceBlocks;
    private final BlockTable destinationBlocks;
    private final Tensor hidden;
    private final Tensor hiddenOut;

    /**
     * @param sourceBlocks the producer's block ids, in token order
     * @param destinationBlocks the consumer's block ids, in token order, inside a cache of {@code cacheBlocks}
     * @param withHidden whether the request carries hidden states (both connectors hold them)
     * @param arena where the hidden-state tensors live
     */
    RequestKv(KVLayout layout, RequestTokens request, int cacheBlocks, int[] sourceBlocks, int[] destinationBlocks,
              boolean withHidden, Arena arena, long seed) {
        this.layout = layout;
        this.request = request;
        int tokens = request.totalTokens();
        this.sourceBlocks = new BlockTable(sourceBlocks, layout.blockSize(), tokens);
        this.destinationBlocks = new BlockTable(destinationBlocks, layout.blockSize(), tokens);
        this.source = PagedKVCache.allocate(layout, cacheBlocks);
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                Segments.fill(source.tensor(l, t), seed * 1000 + l * 10L + t);
            }
        }
        TensorSpec hs = TensorSpec.of(DType.FP32, tokens, layout.hiddenSize());
        this.hidden = withHidden ? Tensor.host(hs, Segments.random(arena, hs.byteSize(), seed * 7919)) : null;
        this.hiddenOut = withHidden ? Tensor.host(hs, arena.allocate(hs.byteSize())) : null;
    }

    RequestTokens request() {
        return request;
    }

    BlockTable destinationBlocks() {
        return destinationBlocks;
    }

    /** The consumer's target: {@code destination} at this request's blocks, plus the hidden states when carried. */
    DropTarget target(PagedKVCache destination) {
        DropTarget t = DropTarget.paged(destination, destinationBlocks);
        return hidden == null ? t : t.withHidden(hiddenOut);
    }

    /** Puts layer {@code layer}, gathered from the producer's cache. */
    void put(InsertSession insert, int layer) {
        insert.putLayer(layer, source, sourceBlocks);
    }

    /** Puts the hidden states when the request carries them. */
    void putHidden(InsertSession insert) {
        if (hidden != null) {
            insert.putHidden(hidden);
        }
    }

    /** Puts every layer and the hidden states, then commits. */
    void insertAll(InsertSession insert) {
        for (int l = 0; l < layout.numLayers(); l++) {
            put(insert, l);
        }
        putHidden(insert);
        insert.commit();
    }

    /**
     * Where layer {@code layer} of {@code destination} first differs from the producer's bytes, as
     * "tensor t token i", or null when every token of every tensor arrived.
     */
    String firstMismatch(PagedKVCache destination, int layer) {
        long tb = layout.bytesPerTokenPerTensor();
        for (int t = 0; t < layout.tensorsPerLayer(); t++) {
            MemorySegment want = source.tensor(layer, t);
            MemorySegment got = destination.tensor(layer, t);
            for (int i = 0; i < request.totalTokens(); i++) {
                long s = sourceBlocks.slot(i) * tb;
                long d = destinationBlocks.slot(i) * tb;
                if (MemorySegment.mismatch(want, s, s + tb, got, d, d + tb) != -1) {
                    return "tensor " + t + " token " + i;
                }
            }
        }
        return null;
    }

    /** Whether the hidden states the consumer received equal the producer's (true when none are carried). */
    boolean hiddenLanded() {
        return hidden == null || Segments.equal(hidden.segment(), hiddenOut.segment(), hidden.spec().byteSize());
    }

    /** Fills every byte of {@code cache} with {@link #UNTOUCHED}. */
    static void fillUntouched(PagedKVCache cache) {
        KVLayout layout = cache.layout();
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                cache.tensor(l, t).fill(UNTOUCHED);
            }
        }
    }

    /**
     * The first token slot of {@code cache} outside every one of {@code owners}' destination slots whose bytes are
     * no longer {@link #UNTOUCHED}, as "layer l tensor t slot s", or null when none changed.
     */
    static String firstChangeOutside(PagedKVCache cache, RequestKv... owners) {
        KVLayout layout = cache.layout();
        BitSet owned = new BitSet();
        for (RequestKv o : owners) {
            for (int i = 0; i < o.request.totalTokens(); i++) {
                owned.set(Math.toIntExact(o.destinationBlocks.slot(i)));
            }
        }
        long tb = layout.bytesPerTokenPerTensor();
        int slots = cache.numBlocks() * layout.blockSize();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment untouched = a.allocate(tb);
            untouched.fill(UNTOUCHED);
            for (int l = 0; l < layout.numLayers(); l++) {
                for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                    MemorySegment s = cache.tensor(l, t);
                    for (int slot = owned.nextClearBit(0); slot < slots; slot = owned.nextClearBit(slot + 1)) {
                        if (MemorySegment.mismatch(untouched, 0, tb, s, slot * tb, slot * tb + tb) != -1) {
                            return "layer " + l + " tensor " + t + " slot " + slot;
                        }
                    }
                }
            }
        }
        return null;
    }

    @Override
    public void close() {
        source.close();
    }
}
