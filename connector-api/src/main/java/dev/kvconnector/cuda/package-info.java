/**
 * GPU-resident KV: FFM bindings to the CUDA driver API ({@link dev.kvconnector.cuda.CudaDriver}, loaded lazily,
 * never needed by the host path), a probe of the machine ({@link dev.kvconnector.cuda.CudaRuntime#probe()}), the
 * paged-KV gather/scatter kernels of {@code native/cuda/paged_kv.cu} ({@link dev.kvconnector.cuda.CudaPagedKernels},
 * launch geometry in {@link dev.kvconnector.cuda.PagedKernelGeometry}), and double-buffered pinned staging of layers
 * for host stores ({@link dev.kvconnector.cuda.LayerStagingPipeline}).
 */
package dev.kvconnector.cuda;
