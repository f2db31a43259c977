package dev.kvconnector.codec.vllm;

import dev.kvconnector.codec.ChunkObjectPlan;
import dev.kvconnector.codec.Completion;
import dev.kvconnector.codec.KvOnlyPlan;
import dev.kvconnector.codec.ObjectCodec;
import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.codec.TensorPlacement;
import dev.kvconnector.codec.vllm.VllmV1ValueLayout.TokenOrder;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.layout.KVLayout;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * vLLM V1 {@code MooncakeStoreConnector}'s values as an {@link ObjectCodec}, paired with the {@code vllm-v1} key
 * scheme: one object per full block of {@code layout.blockSize()} tokens ({@link Completion#PER_CHUNK}: put once
 * every layer of the block is in), laid out as {@link VllmV1ValueLayout} says: per layer the K block then the V block
 * (MLA: the latent block), each {@code blockSize x kvHeads x headSize} in {@link TokenOrder#NHD} or
 * {@link TokenOrder#HND} order. No header, no checksum, no hidden states: vLLM writes none.
 *
 * <p>What a reader can detect: only a value of another size ({@link #WRONG_SIZE}, a {@code LAYOUT_MISMATCH} miss
 * whose reason names both sizes and the layout). A value of the right size written with another dtype, head order,
 * head split or layer order, and flipped bytes, are read as they are.
 */
public final class VllmV1Codec implements ObjectCodec {
    /** The codec's name. */
    public static final String NAME = "vllm-v1-blocks";
    /** Status: the value is not the size of a block of this layout. */
    public static final int WRONG_SIZE = -1;

    private final TokenOrder order;

    private VllmV1Codec(TokenOrder order) {
        this.order = Objects.requireNonNull(order, "order");
    }

    /** The codec for block segments in {@code order} (FlashAttention's default is {@link TokenOrder#NHD}). */
    public static VllmV1Codec of(TokenOrder order) {
        return new VllmV1Codec(order);
    }

    /** The physical order of a block segment. */
    public TokenOrder order() {
        return order;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Granularity granularity() {
        return Granularity.CHUNK;
    }

    @Override
    public Completion completion() {
        return Completion.PER_CHUNK;
    }

    /** One vLLM block per object: {@code layout.blockSize()} tokens, whatever is configured. */
    @Override
    public int chunkTokens(KVLayout layout, int configured) {
        return layout.blockSize();
    }

    /** vLLM V1 values hold KV alone. */
    @Override
    public boolean holdsHiddenStates() {
        return false;
    }

    @Override
    public ObjectPlan plan(KeyPlan keys, KVLayout layout, boolean checksums) {
        return new Plan(keys, new VllmV1ValueLayout(layout, order));
    }

    private static final class Plan extends ChunkObjectPlan implements KvOnlyPlan {
        private final VllmV1ValueLayout value;
        private final KVLayout layout;

        Plan(KeyPlan keys, VllmV1ValueLayout value) {
            super(keys);
            this.value = value;
            this.layout = value.layout();
            for (ChunkKeys c : keys.chunks()) {
                if (c.tokens() != layout.blockSize()) {
                    throw KVException.of(ErrorCode.INVALID_ARGUMENT, "chunk " + c.index() + " covers " + c.tokens()
                                    + " tokens, but a vLLM V1 value is one block of " + layout.blockSize() + " tokens")
                            .operation("plan")
                            .hint("plan vllm-v1 keys with chunkTokens equal to the layout's block size").build();
                }
            }
        }

        @Override
        public String objectsName() {
            return "vLLM V1 values";
        }

        @Override
        public long layerObjectBytes(int chunk, int layer) {
            return value.objectBytes();
        }

        @Override
        public TensorPlacement placement(int chunk, int layer, int tensor) {
            long offset = value.segmentOffset(layer, tensor);
            long headBytes = (long) layout.headSize() * layout.dtype().byteWidth();
            int tokens = layout.blockSize();
            return value.order() == TokenOrder.NHD
                    ? TensorPlacement.contiguous(offset, tokens, layout.kvHeads(), headBytes)
                    : new TensorPlacement(offset, tokens, layout.kvHeads(), headBytes, headBytes, tokens * headBytes);
        }

        /** Nothing to write: a vLLM V1 value is its segments alone. */
        @Override
        public void seal(int chunk, int layer, MemorySegment object) {
        }

        /** Nothing to write: there is no header. */
        @Override
        public void sealDetached(int chunk, int layer, MemorySegment header) {
        }

        @Override
        public long headerBytes() {
            return 0;
        }

        @Override
        public int validate(int chunk, int layer, MemorySegment object, long length) {
            return validateHeader(chunk, layer, object, length);
        }

        @Override
        public int validateHeader(int chunk, int layer, MemorySegment header, long length) {
            return value.fits(length) ? OK : WRONG_SIZE;
        }

        @Override
        public String describe(int status) {
            return status == WRONG_SIZE
                    ? "the value is not " + value.objectBytes() + " bytes, the size of a block of this layout ("
                            + layout.numLayers() + " layers x " + value.segmentsPerLayer() + " segments x "
                            + value.segmentBytes() + " bytes, " + value.order() + "): another writer used this model "
                            + "name with another layout, TP split or block size"
                    : "status " + status;
        }

        @Override
        public boolean isLayoutMismatch(int status) {
            return status == WRONG_SIZE;
        }
    }
}
