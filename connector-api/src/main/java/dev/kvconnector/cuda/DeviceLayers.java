package dev.kvconnector.cuda;

import dev.kvconnector.connector.ChunkGeometry;
import dev.kvconnector.connector.ConnectorResources;
import dev.kvconnector.connector.InsertChannel;
import dev.kvconnector.connector.LayerChecks;
import dev.kvconnector.connector.LayerSink;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.SinkTransfer;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.TokenSlots;

/**
 * A paged KV cache in GPU memory, read or written through one request's slots: a {@link LayerSource} and a
 * {@link LayerSink} for any connector. K and V (or the latent) are gathered and scattered on the GPU by the paged-KV
 * kernel, through the connector's pooled pinned host staging; with a {@code DEVICE_MEMORY} store they are put from
 * and read into registered device buffers instead (GPUDirect). An insert layer must be complete on the device when
 * it is put (the engine has synchronized the stream that wrote it); a drop-select layer counts as loaded once its
 * scatter has completed on the device. Without a driver, a GPU or the kernels, transfers fail with an error naming
 * what is missing; host transfers never load the driver.
 *
 * @param cache the device paged cache
 * @param slots the request's slots, covering at least its tokens
 */
public record DeviceLayers(DevicePagedKVCache cache, TokenSlots slots) implements LayerSource, LayerSink {
    /** The source or sink for {@code cache} at the request's {@code slots}. */
    public static DeviceLayers of(DevicePagedKVCache cache, TokenSlots slots) {
        return new DeviceLayers(cache, slots);
    }

    @Override
    public void check(KVLayout layout, int tokens, String op, String endpoint) {
        LayerChecks.paged("device paged cache", cache.layout(), slots, layout, tokens, op, endpoint);
    }

    /** Through {@link LayerStagingPipeline}: the copy of layer {@code i + 1} runs while layer {@code i} is put. */
    @Override
    public void insert(InsertChannel channel, int first, int count) {
        try (DeviceTransfer device = new DeviceTransfer(channel.resources(), channel.geometry(), cache, slots,
                "putLayer")) {
            LayerStagingPipeline.run(count, device.insertStages(channel, first));
        }
    }

    @Override
    public SinkTransfer open(ConnectorResources resources, ChunkGeometry geometry, String op) {
        return new DeviceTransfer(resources, geometry, cache, slots, op);
    }
}
