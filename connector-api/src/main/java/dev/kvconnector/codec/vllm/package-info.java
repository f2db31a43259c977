/**
 * The value vLLM V1's {@code MooncakeStoreConnector} stores under a {@code vllm-v1} key
 * ({@link dev.kvconnector.key.vllm.VllmV1KeyScheme}): raw KV bytes with no header, laid out as
 * {@link dev.kvconnector.codec.vllm.VllmV1ValueLayout} computes.
 */
package dev.kvconnector.codec.vllm;
