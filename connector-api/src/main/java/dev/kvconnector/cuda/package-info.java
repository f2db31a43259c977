/**
 * GPU-resident KV: FFM bindings to the CUDA driver API ({@link dev.kvconnector.cuda.CudaDriver}, loaded lazily,
 * never needed by the host path), a probe of the machine ({@link dev.kvconnector.cuda.CudaRuntime#probe()}), the
 * paged-KV gather/scatter kernels of {@code native/cuda/paged_kv.cu} ({@link dev.kvconnector.cuda.CudaPagedKernels},
 * launch geometry in {@link dev.kvconnector.cuda.PagedKernelGeometry}), and double-buffered staging of layers
 * ({@link dev.kvconnector.cuda.LayerStagingPipeline}; {@link dev.kvconnector.cuda.PinnedLayerStaging} is a
 * standalone form with its own {@code cuMemHostAlloc} buffers).
 *
 * <h2>Device caches in the connector</h2>
 * An engine whose paged KV cache lives in GPU memory wraps its device allocations in a
 * {@link dev.kvconnector.cuda.DevicePagedKVCache} (no GPU call) and hands it to the connector as a layer source
 * and sink, {@link dev.kvconnector.cuda.DeviceLayers}:
 * <pre>{@code
 * DevicePagedKVCache cache = DevicePagedKVCache.wrap(layout, numBlocks, cudaOrdinal, devicePointers);
 * try (InsertSession insert = kv.beginInsert(prompt)) {
 *     insert.putLayers(DeviceLayers.of(cache, blockTable));  // or putLayer(layer, DeviceLayers.of(..)) per layer
 *     insert.commit();
 * }
 * DropResult r = kv.dropSelect(prompt, DropTarget.of(DeviceLayers.of(cache, myBlockTable)));
 * }</pre>
 * On first use a connector opens one {@link dev.kvconnector.cuda.CudaStaging} for that GPU (primary context, kernels,
 * a pool of device staging buffers, a pool of streams), held as a shared resource of the connector
 * ({@code ConnectorResources.shared}) and closed with it; the connector package itself knows nothing of CUDA. Per layer, the paged-KV gather kernel copies the
 * request's rows into a device buffer laid out like the stored objects (per chunk: a 64-byte header, then K, then V),
 * and then:
 * <ul>
 *   <li>for host stores ({@code memory:}, {@code shm:}, {@code valkey://}, {@code lm://}, {@code mooncake://} with
 *       {@code gpu-direct=false}): the buffer is copied device-to-host into the connector's pooled staging, which is
 *       page-locked ({@code cuMemHostRegister}) once CUDA staging opens, the header is stamped on the host (with the
 *       payload checksum) and the layer is put as from a host cache. {@code putLayers} runs {@link
 *       dev.kvconnector.cuda.LayerStagingPipeline}, so the gather and copy of layer {@code i + 1} overlap the put of
 *       layer {@code i}. Drop-select reads and checks each layer on the host, copies it to the device and scatters
 *       it;</li>
 *   <li>for a store with {@code StoreCapability.DEVICE_MEMORY} ({@code mooncake://} with {@code gpu-direct=true}):
 *       the device buffers are registered with the store as they are allocated ({@code register_buffer} on the device
 *       address) and the store puts from them and gets into them directly (GPUDirect RDMA). Only the headers cross
 *       to the host: written there without a payload CRC (the codec's {@code sealDetached}) and copied up, and on
 *       drop-select copied down and checked (the codec's {@code validateHeader}).</li>
 * </ul>
 * The layer must be complete on the device when it is put (the engine has synchronized the stream that wrote it);
 * a drop-select layer counts as loaded once its scatter has completed. Slots are checked on the host before they are
 * uploaded, because the kernels skip out-of-range slots silently. Hidden states stay host tensors.
 *
 * <p>Without the driver library, without a device, or with a connector-api built without {@code nvcc} (no kernels),
 * a device cache fails with a {@code KVException} that names what is missing and where it was looked for; there is
 * no fallback to the host, and host caches keep working.
 *
 * <p>Tests: {@code DeviceConnectorContract} (in the test-jar) runs the device path against the host path for any
 * store, against the CUDA driver test double ({@code native/cuda/driver-double}) in CI and against the GPU in
 * {@code native/cuda/device-check.sh}.
 */
package dev.kvconnector.cuda;
