package dev.kvconnector.tensor;

/** Where a tensor's bytes live. */
public enum MemoryKind {
    /** Ordinary host memory: any CPU code may read and write it. */
    HOST,
    /** Page-locked host memory, usable as a DMA source or target for a GPU and by the CPU. */
    PINNED_HOST,
    /** CUDA device memory; the segment only carries the device address and must not be read by the CPU. */
    CUDA_DEVICE;

    /** Whether CPU code may dereference memory of this kind. */
    public boolean hostAccessible() {
        return this != CUDA_DEVICE;
    }
}
