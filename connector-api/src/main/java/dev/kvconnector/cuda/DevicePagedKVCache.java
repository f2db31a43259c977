package dev.kvconnector.cuda;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.MemoryLocation;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * An engine's paged KV cache in CUDA device memory, in vLLM's flash layout: for every layer and every tensor of the
 * layer (K and V for MHA, the latent for MLA) one device allocation of {@code [numBlocks, blockSize, kvHeads,
 * headSize]} elements. The device counterpart of {@link dev.kvconnector.paged.PagedKVCache#wrap}: the engine keeps
 * ownership, and this object only holds the device addresses (no CPU code ever reads them).
 *
 * <p>The connector takes it in {@code InsertSession.putLayer(int, DevicePagedKVCache, TokenSlots)},
 * {@code InsertSession.putLayers} and {@code DropTarget.device}. Wrapping needs no GPU; moving data does, and fails
 * with a clear error where there is no driver, no device or no kernels.
 */
public final class DevicePagedKVCache {
    private final KVLayout layout;
    private final int numBlocks;
    private final int device;
    private final CudaPagedKernels.DeviceLayer[] layers;

    private DevicePagedKVCache(KVLayout layout, int numBlocks, int device, CudaPagedKernels.DeviceLayer[] layers) {
        this.layout = layout;
        this.numBlocks = numBlocks;
        this.device = device;
        this.layers = layers;
    }

    /**
     * Wraps the engine's device allocations {@code perLayer[layer][tensor]}, each at least
     * {@code numBlocks * layout.blockBytes()} bytes, on visible device {@code deviceOrdinal}.
     *
     * @throws KVException {@link ErrorCode#SHAPE_MISMATCH} when the layer or tensor counts differ from the layout,
     *     {@link ErrorCode#INVALID_ARGUMENT} for a null address, no blocks or a negative ordinal
     */
    public static DevicePagedKVCache wrap(KVLayout layout, int numBlocks, int deviceOrdinal, long[][] perLayer) {
        if (numBlocks <= 0 || deviceOrdinal < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a device paged cache needs numBlocks > 0 and a device "
                    + "ordinal >= 0, not numBlocks=" + numBlocks + " device=" + deviceOrdinal).build();
        }
        if (perLayer.length != layout.numLayers()) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, perLayer.length + " layers given, layout "
                    + layout.name() + " has " + layout.numLayers()).build();
        }
        long slots = (long) numBlocks * layout.blockSize();
        CudaPagedKernels.DeviceLayer[] layers = new CudaPagedKernels.DeviceLayer[perLayer.length];
        for (int l = 0; l < perLayer.length; l++) {
            if (perLayer[l].length != layout.tensorsPerLayer()) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, "layer " + l + " has " + perLayer[l].length
                        + " tensors, layout needs " + layout.tensorsPerLayer()).build();
            }
            for (int t = 0; t < perLayer[l].length; t++) {
                if (perLayer[l][t] == 0) {
                    throw KVException.of(ErrorCode.INVALID_ARGUMENT, "layer " + l + " tensor " + t
                            + " has device address 0").build();
                }
            }
            layers[l] = new CudaPagedKernels.DeviceLayer(perLayer[l], slots, layout.bytesPerTokenPerTensor());
        }
        return new DevicePagedKVCache(layout, numBlocks, deviceOrdinal, layers);
    }

    /** The layout. */
    public KVLayout layout() {
        return layout;
    }

    /** Blocks per tensor. */
    public int numBlocks() {
        return numBlocks;
    }

    /** The visible ordinal of the device holding the cache. */
    public int device() {
        return device;
    }

    /** Where the cache lives, {@code cuda:N}. */
    public MemoryLocation location() {
        return MemoryLocation.cuda(device);
    }

    /** Slots per tensor: {@code numBlocks * blockSize}. */
    public long slots() {
        return (long) numBlocks * layout.blockSize();
    }

    /** The device address of one layer's tensor (0 = K or latent, 1 = V). */
    public long address(int layer, int tensor) {
        return layers[layer].cache()[tensor];
    }

    /** One layer as the kernels take it. */
    CudaPagedKernels.DeviceLayer layer(int layer) {
        return layers[layer];
    }

    /**
     * Writes the slot of each of the first {@code tokens} tokens of {@code slots} as an {@code int64} slot mapping
     * into host memory {@code dst}, checking each against the cache: the kernels skip slots outside the cache and
     * cannot report them, so a wrong index is caught here, before anything moves.
     *
     * @throws KVException {@link ErrorCode#INVALID_ARGUMENT} naming the token, its slot and the cache's slot count
     */
    public void writeSlotMapping(TokenSlots slots, int tokens, MemorySegment dst) {
        long capacity = slots();
        for (int t = 0; t < tokens; t++) {
            long s = slots.slot(t);
            if (s < 0 || s >= capacity) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "token " + t + " maps to slot " + s
                        + ", outside the device cache's " + capacity + " slots (numBlocks=" + numBlocks
                        + " x blockSize=" + layout.blockSize() + ")").build();
            }
            dst.setAtIndex(ValueLayout.JAVA_LONG, t, s);
        }
    }
}
