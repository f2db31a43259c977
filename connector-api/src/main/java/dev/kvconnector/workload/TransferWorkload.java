package dev.kvconnector.workload;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/**
 * One model-sized request moved through a connector: the workload that {@code kvctl bench} and the JMH suite both
 * run, so their numbers come from the same code paths and the same sizes.
 *
 * <p>Holds contiguous source tensors for every layer ({@code [tokens, kvHeads, headSize]}, random bytes), matching
 * destination tensors, and hidden states, all in one arena allocated once. {@link #insert(int)} and
 * {@link #dropSelect(int)} move request number {@code i}; each number gets its own namespace, so iterations never
 * share keys.
 */
public final class TransferWorkload implements AutoCloseable {
    private final KVStoreConnector connector;
    private final KVLayout layout;
    private final int tokens;
    private final boolean hidden;
    private final Arena arena = Arena.ofShared();
    private final Tensor[][] source;
    /** Each layer's source tensors as a layer source, made once. */
    private final LayerSource[] sourceLayers;
    private final Tensor[][] target;
    private final Tensor sourceHidden;
    private final Tensor targetHidden;
    private final int[] prompt;
    /** Where every drop-select lands, made once as an engine's would be. */
    private final DropTarget dropTarget;
    /** The session of the last insert, ended, in which the next one begins. */
    private InsertSession lastInsert;

    /**
     * @param store the store to move through (the caller closes it)
     * @param layout the model's layout
     * @param tokens prompt tokens per request
     * @param hidden whether to move hidden states too
     */
    public TransferWorkload(KVStore store, KVLayout layout, int tokens, boolean hidden) {
        this(store, layout, tokens, hidden, true);
    }

    /**
     * @param store the store to move through (the caller closes it)
     * @param layout the model's layout
     * @param tokens prompt tokens per request
     * @param hidden whether to move hidden states too
     * @param checksums whether layer objects carry a CRC32C of their payload
     */
    public TransferWorkload(KVStore store, KVLayout layout, int tokens, boolean hidden, boolean checksums) {
        if (tokens < 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a request needs at least one token, not " + tokens).build();
        }
        this.layout = layout;
        this.tokens = tokens;
        this.hidden = hidden;
        this.connector = KVStoreConnector.builder(store, layout).modelId("bench/" + layout.name())
                .dropMode(DropMode.CONSUME).checksums(checksums).stagingBytes(Math.max(1L << 30, 4 * layout.layerBytes(tokens) + (64L << 20)))
                .build();
        TensorSpec spec = TensorSpec.of(layout.dtype(), tokens, layout.kvHeads(), layout.headSize());
        source = new Tensor[layout.numLayers()][layout.tensorsPerLayer()];
        target = new Tensor[layout.numLayers()][layout.tensorsPerLayer()];
        SplittableRandom r = new SplittableRandom(42);
        for (int l = 0; l < source.length; l++) {
            for (int t = 0; t < source[l].length; t++) {
                source[l][t] = Tensor.host(spec, fill(arena.allocate(spec.byteSize(), 64), r));
                target[l][t] = Tensor.host(spec, arena.allocate(spec.byteSize(), 64));
            }
        }
        TensorSpec hs = TensorSpec.of(layout.dtype(), tokens, layout.hiddenSize());
        sourceHidden = Tensor.host(hs, fill(arena.allocate(hs.byteSize(), 64), r));
        targetHidden = Tensor.host(hs, arena.allocate(hs.byteSize(), 64));
        prompt = new int[tokens];
        for (int i = 0; i < tokens; i++) {
            prompt[i] = r.nextInt(128_000);
        }
        sourceLayers = new LayerSource[source.length];
        for (int l = 0; l < source.length; l++) {
            sourceLayers[l] = LayerSource.contiguous(l, source[l]);
        }
        DropTarget t = DropTarget.contiguous(target);
        dropTarget = hidden ? t.withHidden(targetHidden) : t;
    }

    private static MemorySegment fill(MemorySegment s, SplittableRandom r) {
        for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
        return s;
    }

    /** The request numbered {@code i}. */
    public RequestTokens request(int i) {
        return RequestTokens.of(prompt).inNamespace("bench-" + i);
    }

    /** Inserts request {@code i}: every layer, the hidden states if enabled, then commit. */
    public void insert(int i) {
        insert(request(i));
    }

    /**
     * Inserts {@code request} (one of {@link #request}'s): every layer, the hidden states if enabled, then commit; in
     * the session of the insert before, as an engine that wants no allocation per request does.
     */
    public void insert(RequestTokens request) {
        InsertSession s = connector.beginInsert(request, lastInsert);
        lastInsert = s;
        try (s) {
            for (int l = 0; l < source.length; l++) {
                s.putLayer(l, sourceLayers[l]);
            }
            if (hidden) {
                s.putHidden(sourceHidden);
            }
            s.commit();
        }
    }

    /** Drop-selects request {@code i} into the target tensors (consuming it). */
    public DropResult dropSelect(int i) {
        return dropSelect(request(i));
    }

    /** Drop-selects {@code request} (one of {@link #request}'s) into the target tensors (consuming it). */
    public DropResult dropSelect(RequestTokens request) {
        return connector.dropSelect(request, dropTarget);
    }

    /**
     * The memory floor of moving this request: one {@code MemorySegment.copy} of every layer's tensors from the
     * source into the target, as cold in cache as a real transfer (a whole request does not fit in the CPU's caches).
     *
     * @return the nanoseconds the copies took
     */
    public long copyRequestOnce() {
        long t0 = System.nanoTime();
        for (int l = 0; l < source.length; l++) {
            for (int t = 0; t < source[l].length; t++) {
                MemorySegment.copy(source[l][t].segment(), 0, target[l][t].segment(), 0, source[l][t].spec().byteSize());
            }
        }
        return System.nanoTime() - t0;
    }

    /** Whether the target now holds exactly the source bytes. */
    public boolean targetMatchesSource() {
        long n = source[0][0].spec().byteSize();
        for (int l = 0; l < source.length; l++) {
            for (int t = 0; t < source[l].length; t++) {
                if (MemorySegment.mismatch(source[l][t].segment(), 0, n, target[l][t].segment(), 0, n) != -1) {
                    return false;
                }
            }
        }
        return !hidden || MemorySegment.mismatch(sourceHidden.segment(), 0, sourceHidden.spec().byteSize(),
                targetHidden.segment(), 0, targetHidden.spec().byteSize()) == -1;
    }

    /** The connector, for its metrics. */
    public KVStoreConnector connector() {
        return connector;
    }

    /** The layout. */
    public KVLayout layout() {
        return layout;
    }

    /** Prompt tokens per request. */
    public int tokens() {
        return tokens;
    }

    /** Bytes of one layer (K and V, or the latent) of one request. */
    public long layerBytes() {
        return layout.layerBytes(tokens);
    }

    /** Closes the connector and frees the tensors. */
    @Override
    public void close() {
        connector.close();
        arena.close();
    }
}
