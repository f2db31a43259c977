package dev.kvconnector.codec;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;

/**
 * vLLM V0 {@code MooncakeStoreConnector}'s objects as an {@link ObjectCodec}, paired with the {@code vllm-v0} key
 * scheme: one object per request ({@link Completion#PER_CHUNK}, the request planned as one chunk), safetensors
 * {@code {"tensor": [2, L, T, H, D], "device_id": int32}} ({@link VllmV0Object}): the K planes of every layer, then
 * the V planes, each {@code [T, H, D]} contiguous; for MLA the latent is stored twice (as vLLM stores it), sealing
 * copies the first half into the second in one pass. One hidden-state object {@code [T, hidden]} in the same format,
 * which the connector puts after the KV object, so that a reader that finds the hidden states finds the KV. No
 * checksum (the format has none).
 *
 * <p>Validation: bytes that are not such a safetensors object are corrupt; a tensor of another shape or dtype is a
 * layout mismatch, and so is a header of another length than the one this codec writes (the tensor then starts
 * elsewhere; vLLM writes the same header). Hidden states are planned in the layout's dtype: the offset of their
 * rows depends on the dtype's name in the header, so a hidden dtype whose header is longer is refused.
 */
public final class VllmV0Codec implements ObjectCodec {
    /** The codec's name. */
    public static final String NAME = "vllm-v0-safetensors";
    /** Status: the bytes are not a vLLM V0 safetensors object. */
    public static final int NOT_SAFETENSORS = -1;
    /** Status: the tensor has another shape or dtype than this layout's. */
    public static final int OTHER_SPEC = -2;
    /** Status: the header has another length, so the tensor starts at another offset. */
    public static final int OTHER_HEADER = -3;
    /** Status: the object's size is not this layout's. */
    public static final int WRONG_SIZE = -4;

    private final int deviceId;

    private VllmV0Codec(int deviceId) {
        this.deviceId = deviceId;
    }

    /**
     * The codec writing {@code deviceId} into {@code device_id} (vLLM writes the producer's CUDA device, or -1 for
     * the CPU).
     */
    public static VllmV0Codec of(int deviceId) {
        return new VllmV0Codec(deviceId);
    }

    /** The device index written into every object. */
    public int deviceId() {
        return deviceId;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Granularity granularity() {
        return Granularity.WHOLE_REQUEST;
    }

    @Override
    public Completion completion() {
        return Completion.PER_CHUNK;
    }

    @Override
    public ObjectPlan plan(KeyPlan keys, KVLayout layout, boolean checksums) {
        return new Plan(keys, layout);
    }

    /** The KV tensor's spec for {@code tokens} tokens of {@code layout}: {@code [2, L, T, H, D]}. */
    public static TensorSpec kvSpec(KVLayout layout, int tokens) {
        return TensorSpec.of(layout.dtype(), 2, layout.numLayers(), tokens, layout.kvHeads(), layout.headSize());
    }

    private final class Plan extends ChunkObjectPlan {
        private final KVLayout layout;
        private final TensorSpec[] specs;
        private final SafetensorsLayout[] objects;
        private final long[] dataOffsets;

        Plan(KeyPlan keys, KVLayout layout) {
            super(keys);
            this.layout = layout;
            this.specs = new TensorSpec[chunks()];
            this.objects = new SafetensorsLayout[chunks()];
            this.dataOffsets = new long[chunks()];
            for (int c = 0; c < chunks(); c++) {
                specs[c] = kvSpec(layout, chunk(c).tokens());
                objects[c] = VllmV0Object.layout(specs[c]);
                dataOffsets[c] = objects[c].dataOffset(VllmV0Object.TENSOR);
            }
        }

        @Override
        public long layerObjectBytes(int chunk, int layer) {
            return objects[chunk].encodedSize();
        }

        private long planeBytes(int chunk) {
            return chunk(chunk).tokens() * layout.bytesPerTokenPerTensor();
        }

        @Override
        public TensorPlacement placement(int chunk, int layer, int tensor) {
            long offset = dataOffsets[chunk] + ((long) tensor * layout.numLayers() + layer) * planeBytes(chunk);
            return TensorPlacement.contiguous(offset, chunk(chunk).tokens(), layout.kvHeads(),
                    layout.bytesPerTokenPerTensor() / layout.kvHeads());
        }

        @Override
        public void seal(int chunk, int layer, MemorySegment object) {
            VllmV0Object.prepare(object, objects[chunk], deviceId);
            if (layout.tensorsPerLayer() == 1) {
                long half = layout.numLayers() * planeBytes(chunk);
                MemorySegment.copy(object, dataOffsets[chunk], object, dataOffsets[chunk] + half, half);
            }
        }

        /** vLLM V0 objects carry no checksum. */
        @Override
        public boolean fusedChecksum() {
            return false;
        }

        @Override
        public void sealWithSum(int chunk, int layer, MemorySegment object, int payloadSum) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "vLLM V0 objects carry no checksum").build();
        }

        @Override
        public int verifyPayloadSum(int chunk, int layer, MemorySegment header, int payloadSum) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "vLLM V0 objects are validated whole, in host memory").build();
        }

        @Override
        public void sealDetached(int chunk, int layer, MemorySegment header) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "vLLM V0 objects are sealed in host memory").build();
        }

        @Override
        public long headerBytes() {
            return dataOffsets.length == 0 ? 0 : dataOffsets[0];
        }

        @Override
        public int validate(int chunk, int layer, MemorySegment object, long length) {
            if (length > object.byteSize()) {
                return WRONG_SIZE;
            }
            return check(object.asSlice(0, length), specs[chunk], dataOffsets[chunk]);
        }

        private static int check(MemorySegment object, TensorSpec expected, long dataOffset) {
            VllmV0Object decoded;
            try {
                decoded = VllmV0Object.decode(object);
            } catch (KVException e) {
                return NOT_SAFETENSORS;
            }
            if (!decoded.tensor().spec().equals(expected)) {
                return OTHER_SPEC;
            }
            return decoded.tensor().segment().address() - object.address() == dataOffset ? OK : OTHER_HEADER;
        }

        @Override
        public int validateHeader(int chunk, int layer, MemorySegment header, long length) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "vLLM V0 objects are validated in host memory").build();
        }

        @Override
        public String hiddenKey(int chunk) {
            return chunk(chunk).hiddenKey();
        }

        private SafetensorsLayout hiddenLayout(int chunk, DType dtype) {
            SafetensorsLayout planned = VllmV0Object.layout(hiddenSpec(chunk, layout.dtype()));
            SafetensorsLayout h = VllmV0Object.layout(hiddenSpec(chunk, dtype));
            if (h.dataOffset(VllmV0Object.TENSOR) != planned.dataOffset(VllmV0Object.TENSOR)) {
                throw KVException.of(ErrorCode.DTYPE_MISMATCH, "hidden states of " + dtype + " get a safetensors "
                        + "header of another length than the layout's " + layout.dtype()).operation("hidden states")
                        .hint("pass hidden states in the model's dtype " + layout.dtype()).build();
            }
            return h;
        }

        private TensorSpec hiddenSpec(int chunk, DType dtype) {
            return TensorSpec.of(dtype, chunk(chunk).tokens(), layout.hiddenSize());
        }

        @Override
        public long hiddenObjectBytes(int chunk, DType dtype) {
            return hiddenLayout(chunk, dtype).encodedSize();
        }

        @Override
        public long hiddenOffset(int chunk) {
            return VllmV0Object.layout(hiddenSpec(chunk, layout.dtype())).dataOffset(VllmV0Object.TENSOR);
        }

        @Override
        public void sealHidden(int chunk, DType dtype, MemorySegment object) {
            VllmV0Object.prepare(object, hiddenLayout(chunk, dtype), deviceId);
        }

        @Override
        public int validateHidden(int chunk, DType dtype, MemorySegment object, long length) {
            if (length > object.byteSize()) {
                return WRONG_SIZE;
            }
            return check(object.asSlice(0, length), hiddenSpec(chunk, dtype), hiddenOffset(chunk));
        }

        @Override
        public String describe(int status) {
            return switch (status) {
                case NOT_SAFETENSORS -> "not a vLLM V0 safetensors object ({\"tensor\", \"device_id\"})";
                case OTHER_SPEC -> "the tensor has another shape or dtype than this layout's";
                case OTHER_HEADER -> "the safetensors header has another length than the one vLLM V0 writes";
                case WRONG_SIZE -> "the object is larger than this layout's";
                default -> "status " + status;
            };
        }

        @Override
        public boolean isLayoutMismatch(int status) {
            return status != NOT_SAFETENSORS;
        }
    }
}
