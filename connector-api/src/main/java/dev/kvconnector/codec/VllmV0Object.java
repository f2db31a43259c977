package dev.kvconnector.codec;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Map;

/**
 * A value as vLLM's V0 {@code MooncakeStoreConnector} stores it: the safetensors bytes of
 * {@code {"tensor": <tensor>, "device_id": <int32 scalar>}}, which vLLM writes with
 * {@code safetensors.torch.save({"tensor": value, "device_id": torch.tensor(device_index, dtype=torch.int32)})},
 * where the device index is the CUDA ordinal of the source tensor or -1 for a CPU tensor.
 *
 * <p>The bytes written here equal the reference writer's: {@code device_id} is a rank-0 I32 tensor of 4 bytes,
 * and the writer's sort (descending dtype alignment, then name) puts it first when the tensor's dtype aligns
 * less than I32 (F16, BF16, FP8, I8, U8), and after {@code tensor} for F32, F64 and I64. There is no metadata.
 *
 * @param tensor the stored tensor, a host view of the object's bytes (no copy)
 * @param deviceId the writer's CUDA device index, or -1 when the tensor was on the CPU
 */
public record VllmV0Object(Tensor tensor, int deviceId) {
    /** The entry holding the KV (or hidden-state) tensor. */
    public static final String TENSOR = "tensor";
    /** The entry holding the device index, an I32 scalar of shape []. */
    public static final String DEVICE_ID = "device_id";

    private static final TensorSpec DEVICE_ID_SPEC = TensorSpec.of(DType.INT32);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The safetensors layout of a V0 value holding a tensor of {@code spec}; keep it while the spec is fixed. */
    public static SafetensorsLayout layout(TensorSpec spec) {
        return Safetensors.layout(Map.of(TENSOR, spec, DEVICE_ID, DEVICE_ID_SPEC), Map.of());
    }

    /** Bytes of a V0 value holding a tensor of {@code spec}. */
    public static long encodedSize(TensorSpec spec) {
        return layout(spec).encodedSize();
    }

    /**
     * Writes the header and the device id into {@code target} and returns the slice where the tensor's bytes go,
     * so that a producer can gather KV straight into the object.
     *
     * @param target at least {@code layout.encodedSize()} bytes
     * @param layout {@link #layout(TensorSpec)} of the tensor to be stored
     * @param deviceId the CUDA device index, or -1 for CPU
     * @return the tensor's {@code spec.byteSize()} bytes inside {@code target}
     */
    public static MemorySegment prepare(MemorySegment target, SafetensorsLayout layout, int deviceId) {
        layout.writeHeader(target);
        layout.slice(target, DEVICE_ID).set(I32, 0, deviceId);
        return layout.slice(target, TENSOR);
    }

    /**
     * Encodes a host tensor and a device index into {@code target}.
     *
     * @return the bytes written
     */
    public static long encode(MemorySegment target, Tensor tensor, int deviceId) {
        tensor.requireHostAccessible("encode");
        SafetensorsLayout layout = layout(tensor.spec());
        MemorySegment.copy(tensor.segment(), 0, prepare(target, layout, deviceId), 0, tensor.spec().byteSize());
        return layout.encodedSize();
    }

    /**
     * Parses and validates a V0 value; the tensor is a view of {@code object}. Entries other than the two are
     * tolerated, as vLLM's reader ignores them.
     *
     * @param object exactly the stored object's bytes
     * @throws KVException {@link ErrorCode#CORRUPT_OBJECT} when the bytes are not valid safetensors, the
     *     {@code tensor} entry is missing, or {@code device_id} is missing or not an I32 scalar
     */
    public static VllmV0Object decode(MemorySegment object) {
        SafetensorsObject parsed = Safetensors.read(object);
        if (!parsed.contains(TENSOR) || !parsed.contains(DEVICE_ID)) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "vLLM V0 value lacks '"
                    + (parsed.contains(TENSOR) ? DEVICE_ID : TENSOR) + "'; it holds " + parsed.names())
                    .operation("decode").hint("the object was not written by vLLM's MooncakeStoreConnector (V0)")
                    .build();
        }
        TensorSpec idSpec = parsed.spec(DEVICE_ID);
        if (!idSpec.equals(DEVICE_ID_SPEC)) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "vLLM V0 value has device_id " + idSpec
                    + "; expected an int32 scalar with shape []").operation("decode")
                    .hint("the object was not written by vLLM's MooncakeStoreConnector (V0)").build();
        }
        return new VllmV0Object(parsed.tensor(TENSOR), parsed.tensor(DEVICE_ID).segment().get(I32, 0));
    }
}
