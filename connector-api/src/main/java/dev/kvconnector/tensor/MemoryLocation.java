package dev.kvconnector.tensor;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * A memory kind plus, for device memory, the CUDA device index.
 *
 * @param kind the memory kind
 * @param deviceIndex the CUDA device ordinal for {@link MemoryKind#CUDA_DEVICE}, otherwise -1
 */
public record MemoryLocation(MemoryKind kind, int deviceIndex) {
    /** Ordinary host memory. */
    public static final MemoryLocation HOST = new MemoryLocation(MemoryKind.HOST, -1);
    /** Pinned host memory. */
    public static final MemoryLocation PINNED_HOST = new MemoryLocation(MemoryKind.PINNED_HOST, -1);

    /** Validates the pairing of kind and index. */
    public MemoryLocation {
        if (kind == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "memory kind is null").build();
        }
        if ((kind == MemoryKind.CUDA_DEVICE) != (deviceIndex >= 0)) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT,
                    "device index " + deviceIndex + " does not fit memory kind " + kind)
                    .hint("CUDA device memory needs an index >= 0; host memory takes -1").build();
        }
    }

    /** CUDA device memory on device {@code index}. */
    public static MemoryLocation cuda(int index) {
        return new MemoryLocation(MemoryKind.CUDA_DEVICE, index);
    }

    @Override
    public String toString() {
        return kind == MemoryKind.CUDA_DEVICE ? "cuda:" + deviceIndex : kind.name().toLowerCase(java.util.Locale.ROOT);
    }
}
