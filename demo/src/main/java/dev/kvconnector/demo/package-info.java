/**
 * The XpYd demo's reference engine: a small Llama-architecture model in plain Java (FP32), an off-heap paged KV cache
 * with a block allocator, producer and consumer roles over a {@link dev.kvconnector.connector.KVStoreConnector}, and
 * an OpenAI-compatible HTTP server per instance.
 */
package dev.kvconnector.demo;
