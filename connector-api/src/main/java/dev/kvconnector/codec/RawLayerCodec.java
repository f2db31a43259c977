package dev.kvconnector.codec;

import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;

/**
 * kvconnector's own objects: one per chunk and layer, in {@link RawTensorFormat} (a 64-byte header with the layout
 * fingerprint, a header CRC32C and a payload checksum, then the payload
 * {@code [tensors, chunkTokens, kvHeads, headSize]}: K then V, or the MLA latent, each contiguous); one hidden-state object {@code [chunkTokens, hiddenSize]} per chunk in the same
 * format. Paired with the {@code kvc-v1} key scheme.
 */
public final class RawLayerCodec implements ObjectCodec {
    /** The codec's name. */
    public static final String NAME = "kvc-raw";
    /** The one instance (the codec has no settings). */
    public static final RawLayerCodec INSTANCE = new RawLayerCodec();

    private RawLayerCodec() {
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Granularity granularity() {
        return Granularity.CHUNK_LAYER;
    }

    @Override
    public Completion completion() {
        return Completion.PER_LAYER;
    }

    @Override
    public ObjectPlan plan(KeyPlan keys, KVLayout layout, boolean checksums) {
        return new Plan(keys, layout, checksums);
    }

    private static final class Plan implements ObjectPlan {
        private final KeyPlan keys;
        private final ChunkKeys[] chunks;
        private final TensorSpec[] layerSpecs;
        private final TensorPlacement[][] placements;
        private final long fingerprint;
        private final boolean checksums;
        private final int hiddenSize;

        Plan(KeyPlan keys, KVLayout layout, boolean checksums) {
            this.keys = keys;
            this.chunks = keys.chunks().toArray(new ChunkKeys[0]);
            this.fingerprint = layout.fingerprint();
            this.checksums = checksums;
            this.hiddenSize = layout.hiddenSize();
            int tensors = layout.tensorsPerLayer();
            long tokenBytes = layout.bytesPerTokenPerTensor();
            long headBytes = tokenBytes / layout.kvHeads();
            this.layerSpecs = new TensorSpec[chunks.length];
            this.placements = new TensorPlacement[chunks.length][];
            for (int c = 0; c < chunks.length; c++) {
                int t = chunks[c].tokens();
                if (c > 0 && t == chunks[c - 1].tokens()) {
                    layerSpecs[c] = layerSpecs[c - 1];
                    placements[c] = placements[c - 1];
                    continue;
                }
                placements[c] = new TensorPlacement[tensors];
                layerSpecs[c] = TensorSpec.of(layout.dtype(), tensors, t, layout.kvHeads(), layout.headSize());
                for (int i = 0; i < tensors; i++) {
                    placements[c][i] = TensorPlacement.contiguous(RawTensorFormat.HEADER_BYTES + i * t * tokenBytes, t,
                            layout.kvHeads(), headBytes);
                }
            }
        }

        @Override
        public KeyPlan keys() {
            return keys;
        }

        @Override
        public int chunks() {
            return chunks.length;
        }

        /** True: the keys are written from the key plan's chunks at each call. */
        @Override
        public boolean keysFollowKeyPlan() {
            return true;
        }

        @Override
        public Completion completion() {
            return Completion.PER_LAYER;
        }

        @Override
        public String layerKey(int chunk, int layer) {
            return chunks[chunk].layerKey(layer);
        }

        @Override
        public StoreKey layerKey(int chunk, int layer, StoreKey into) {
            return chunks[chunk].layerKey(layer, into);
        }

        @Override
        public long layerObjectBytes(int chunk, int layer) {
            return RawTensorFormat.encodedSize(layerSpecs[chunk]);
        }

        @Override
        public TensorPlacement placement(int chunk, int layer, int tensor) {
            return placements[chunk][tensor];
        }

        @Override
        public void seal(int chunk, int layer, MemorySegment object) {
            RawTensorFormat.writeHeader(object, layerSpecs[chunk], chunks[chunk].tokens(), fingerprint, checksums);
        }

        @Override
        public boolean fusedChecksum() {
            return checksums;
        }

        @Override
        public void sealWithSum(int chunk, int layer, MemorySegment object, int payloadSum) {
            RawTensorFormat.writeHeaderWithSum(object, layerSpecs[chunk], chunks[chunk].tokens(), fingerprint,
                    payloadSum);
        }

        @Override
        public int verifyPayloadSum(int chunk, int layer, MemorySegment header, int payloadSum) {
            return RawTensorFormat.verifyPayloadSum(header, payloadSum);
        }

        @Override
        public void sealDetached(int chunk, int layer, MemorySegment header) {
            RawTensorFormat.writeDetachedHeader(header, layerSpecs[chunk], chunks[chunk].tokens(), fingerprint);
        }

        @Override
        public long headerBytes() {
            return RawTensorFormat.HEADER_BYTES;
        }

        @Override
        public int validate(int chunk, int layer, MemorySegment object, long length) {
            return RawTensorFormat.validate(object, length, layerSpecs[chunk], fingerprint);
        }

        @Override
        public int validateHeader(int chunk, int layer, MemorySegment header, long length) {
            return RawTensorFormat.validateHeader(header, length, layerSpecs[chunk], fingerprint);
        }

        @Override
        public String hiddenKey(int chunk) {
            return chunks[chunk].hiddenKey();
        }

        @Override
        public StoreKey hiddenKey(int chunk, StoreKey into) {
            return chunks[chunk].hiddenKey(into);
        }

        @Override
        public long hiddenObjectBytes(int chunk, DType dtype) {
            return RawTensorFormat.encodedSize(hiddenSpec(chunk, dtype));
        }

        @Override
        public long hiddenOffset(int chunk) {
            return RawTensorFormat.HEADER_BYTES;
        }

        @Override
        public void sealHidden(int chunk, DType dtype, MemorySegment object) {
            RawTensorFormat.writeHeader(object, hiddenSpec(chunk, dtype), chunks[chunk].tokens(), fingerprint,
                    checksums);
        }

        @Override
        public int validateHidden(int chunk, DType dtype, MemorySegment object, long length) {
            return RawTensorFormat.validate(object, length, hiddenSpec(chunk, dtype), fingerprint);
        }

        private TensorSpec hiddenSpec(int chunk, DType dtype) {
            return TensorSpec.of(dtype, chunks[chunk].tokens(), hiddenSize);
        }

        @Override
        public String describe(int status) {
            return RawTensorFormat.describe(status);
        }

        @Override
        public boolean isLayoutMismatch(int status) {
            return RawTensorFormat.isLayoutMismatch(status);
        }
    }
}
