/**
 * Object codecs: how tensors become the bytes a store holds. {@link dev.kvconnector.codec.RawTensorFormat} is
 * kvconnector's own format (a 64-byte checked header, then the payload); {@link dev.kvconnector.codec.Safetensors}
 * reads and writes the safetensors format; {@link dev.kvconnector.codec.VllmV0Object} is the value vLLM's V0
 * MooncakeStoreConnector stores. All of them work on {@code MemorySegment}s and hand out tensor data as
 * zero-copy slices.
 */
package dev.kvconnector.codec;
