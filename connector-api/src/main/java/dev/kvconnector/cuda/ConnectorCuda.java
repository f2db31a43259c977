package dev.kvconnector.cuda;

import dev.kvconnector.connector.ConnectorResources;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * A connector's device staging: one {@link CudaStaging} for the GPU of its first device cache (one GPU per
 * connector, as one engine worker per GPU), opened on first use through {@link ConnectorResources#shared} and closed
 * with the connector. From then on every host staging segment of the connector is page-locked, and with a store that
 * takes device memory every device buffer is registered with it.
 */
final class ConnectorCuda implements AutoCloseable {
    private final CudaStaging staging;
    private final boolean direct;

    private ConnectorCuda(CudaStaging staging, boolean direct) {
        this.staging = staging;
        this.direct = direct;
    }

    /**
     * The connector's device staging for {@code cache}'s GPU, opened on first use.
     *
     * @throws KVException naming the missing driver, device or kernels; or {@code INVALID_ARGUMENT} when the cache is
     *     on another GPU than this connector's earlier device caches
     */
    static ConnectorCuda of(ConnectorResources resources, DevicePagedKVCache cache, String op) {
        ConnectorCuda c = resources.shared(ConnectorCuda.class, () -> open(resources, cache.device()));
        if (c.staging.ordinal() != cache.device()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the paged cache is on cuda:" + cache.device()
                    + " but this connector already moves device KV of cuda:" + c.staging.ordinal())
                    .store(resources.endpoint()).operation(op)
                    .hint("use one connector per GPU, as one engine worker per GPU").build();
        }
        return c;
    }

    private static ConnectorCuda open(ConnectorResources resources, int device) {
        boolean direct = resources.storeTakesDeviceMemory();
        CudaStaging s = direct
                ? CudaStaging.open(device, resources.stagingBytes(), resources::register, resources::unregister)
                : CudaStaging.open(device, resources.stagingBytes(), seg -> { }, seg -> { });
        resources.eachStagingSegment(s::pinHost);
        return new ConnectorCuda(s, direct);
    }

    /** The device staging pool. */
    CudaStaging staging() {
        return staging;
    }

    /** Whether device buffers go to the store directly (GPUDirect) rather than through host staging. */
    boolean direct() {
        return direct;
    }

    @Override
    public void close() {
        staging.close();
    }
}
