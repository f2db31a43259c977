package dev.kvconnector.tensor;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;

/**
 * A tensor: a spec, the memory segment holding its bytes (row-major, little-endian) and where that memory lives.
 * For CUDA device memory the segment carries the device address and size only.
 *
 * @param spec dtype and shape
 * @param segment exactly {@code spec.byteSize()} bytes
 * @param location host, pinned host or a CUDA device
 */
public record Tensor(TensorSpec spec, MemorySegment segment, MemoryLocation location) {

    /** Checks that the segment is exactly as large as the spec. */
    public Tensor {
        if (spec == null || segment == null || location == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "spec, segment and location must not be null").build();
        }
        if (segment.byteSize() != spec.byteSize()) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "segment holds " + segment.byteSize()
                    + " bytes but " + spec + " needs " + spec.byteSize()).build();
        }
    }

    /** A host tensor over {@code segment}. */
    public static Tensor host(TensorSpec spec, MemorySegment segment) {
        return new Tensor(spec, segment, MemoryLocation.HOST);
    }

    /** Throws {@link ErrorCode#UNSUPPORTED_MEMORY} unless the CPU may read this tensor. */
    public Tensor requireHostAccessible(String operation) {
        if (!location.kind().hostAccessible()) {
            throw KVException.of(ErrorCode.UNSUPPORTED_MEMORY, "tensor " + spec + " lives in " + location
                    + " memory, which this path cannot read").operation(operation)
                    .hint("copy it to host or pinned memory first; device tensors need the CUDA path").build();
        }
        return this;
    }
}
