package dev.kvconnector.codec.vllm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * Where each layer's bytes sit in one vLLM V1 {@code MooncakeStoreConnector} object, the value of one block under
 * one rank namespace. Mooncake writes the block's segments back to back ({@code batch_put_from_multi_buffers}),
 * with no header, length or checksum: the object is the concatenation, over the layers in registration order, of
 * that layer's block segments.
 *
 * <ul>
 *   <li>FlashAttention-style caches ({@link AttentionKind#MHA}: {@code (2, num_blocks, block_size, heads,
 *       head_size)}, or FlashInfer's {@code (num_blocks, 2, ...)}, which gives the same bytes): per layer the K
 *       block, then the V block.</li>
 *   <li>MLA ({@link AttentionKind#MLA}): per layer one latent block of {@code kv_lora_rank + qk_rope_head_dim}
 *       elements per token.</li>
 *   <li>A block segment is {@code blockSize x kvHeads x headSize} elements of the KV-cache dtype, in the backend's
 *       physical order: {@link TokenOrder#NHD} ({@code [token][head][dim]}) or {@link TokenOrder#HND}
 *       ({@code [head][token][dim]}).</li>
 * </ul>
 *
 * <p>Nothing in the object describes its layout, so the layout comes from configuration, and a reader can detect
 * only a value of the wrong total size ({@link #fits(long)}). A value of the right size written with another
 * dtype, head order, head count with the same product, or layer order is read as garbage, and so are flipped
 * bytes: there is no checksum. Cross-layer caches (one tensor for every layer) are not covered.
 *
 * @param layout this rank's layout: kind, layers, KV heads per rank, head size, dtype and block size in tokens
 * @param order the physical order of a block segment
 */
public record VllmV1ValueLayout(KVLayout layout, TokenOrder order) {
    /** The physical order of one block segment's elements. */
    public enum TokenOrder {
        /** {@code [block_size][heads][head_size]}: FlashAttention's default. */
        NHD,
        /** {@code [heads][block_size][head_size]}: FlashInfer's and others' HND stride order. */
        HND
    }

    /** Segment index of K (MHA) or of the latent (MLA) within a layer. */
    public static final int KEY = 0;
    /** Segment index of V within an MHA layer. */
    public static final int VALUE = 1;

    /** Checks that both parts are set. */
    public VllmV1ValueLayout {
        Objects.requireNonNull(layout, "layout");
        Objects.requireNonNull(order, "order");
    }

    /** Segments per layer: 2 (K, V) for MHA, 1 (the latent) for MLA. */
    public int segmentsPerLayer() {
        return layout.tensorsPerLayer();
    }

    /** Bytes of one block segment: block size x KV heads x head size x dtype width. */
    public long segmentBytes() {
        return layout.blockBytes();
    }

    /** Bytes of one layer's part of the object. */
    public long layerBytes() {
        return segmentBytes() * segmentsPerLayer();
    }

    /** Bytes of the whole object: every segment of every layer. */
    public long objectBytes() {
        return layerBytes() * layout.numLayers();
    }

    /** Byte offset of segment {@code segment} ({@link #KEY} or {@link #VALUE}) of layer {@code layer}. */
    public long segmentOffset(int layer, int segment) {
        checkIndex("layer", layer, layout.numLayers());
        checkIndex("segment", segment, segmentsPerLayer());
        return layer * layerBytes() + segment * segmentBytes();
    }

    /** Byte offset of layer {@code layer}'s K block (MHA only). */
    public long keyOffset(int layer) {
        requireKind(AttentionKind.MHA, "K");
        return segmentOffset(layer, KEY);
    }

    /** Byte offset of layer {@code layer}'s V block (MHA only). */
    public long valueOffset(int layer) {
        requireKind(AttentionKind.MHA, "V");
        return segmentOffset(layer, VALUE);
    }

    /** Byte offset of layer {@code layer}'s latent block (MLA only). */
    public long latentOffset(int layer) {
        requireKind(AttentionKind.MLA, "latent");
        return segmentOffset(layer, KEY);
    }

    /**
     * Byte offset of one element in the object.
     *
     * @param layer the layer
     * @param segment {@link #KEY} or {@link #VALUE} (MLA: {@link #KEY}, the latent)
     * @param token the token within the block
     * @param head the KV head on this rank (0 for MLA)
     * @param dim the element within the head
     */
    public long elementOffset(int layer, int segment, int token, int head, int dim) {
        long base = segmentOffset(layer, segment);
        checkIndex("token", token, layout.blockSize());
        checkIndex("head", head, layout.kvHeads());
        checkIndex("dim", dim, layout.headSize());
        long element = order == TokenOrder.NHD
                ? ((long) token * layout.kvHeads() + head) * layout.headSize() + dim
                : ((long) head * layout.blockSize() + token) * layout.headSize() + dim;
        return base + element * layout.dtype().byteWidth();
    }

    /** Whether a value of {@code valueBytes} bytes has this layout's size, the only check a raw value allows. */
    public boolean fits(long valueBytes) {
        return valueBytes == objectBytes();
    }

    /**
     * Why a value of {@code valueBytes} bytes cannot have this layout, naming both sizes and the layout, for a
     * miss's reason; null when it fits.
     */
    public String sizeMismatch(long valueBytes) {
        if (fits(valueBytes)) {
            return null;
        }
        return "a vllm-v1 value of " + valueBytes + " bytes, but " + layout.numLayers() + " layers x "
                + segmentsPerLayer() + " segments x " + segmentBytes() + " bytes (" + layout.blockSize() + " tokens x "
                + layout.kvHeads() + " heads x " + layout.headSize() + " x " + layout.dtype() + ", " + order + ") is "
                + objectBytes() + " bytes";
    }

    /**
     * One segment of a stored value, as a view (no copy).
     *
     * @throws KVException {@link ErrorCode#SHAPE_MISMATCH} when the value does not have this layout's size
     */
    public MemorySegment segment(MemorySegment value, int layer, int segment) {
        String mismatch = sizeMismatch(value.byteSize());
        if (mismatch != null) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, mismatch)
                    .hint("the reader's layout (dtype, KV heads per rank, head size, layers, block size) must be the"
                            + " writer's; the value carries none of it").build();
        }
        return value.asSlice(segmentOffset(layer, segment), segmentBytes());
    }

    private void requireKind(AttentionKind kind, String what) {
        if (layout.kind() != kind) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a " + layout.kind() + " layout has no " + what
                    + " segment").build();
        }
    }

    private static void checkIndex(String what, int index, int count) {
        if (index < 0 || index >= count) {
            throw new IndexOutOfBoundsException(what + "=" + index + " count=" + count);
        }
    }
}
