/**
 * JMH benchmarks of per-layer KV transfer latency: every store beside its physical floor (memcpy for in-process
 * stores, a raw loopback socket for network stores) and beside the library a user would otherwise pick (Lettuce,
 * Jedis, Chronicle Bytes), plus {@link dev.kvconnector.benchmarks.report.ReportMain}, which turns JMH's JSON into
 * the report. One "layer" is K and V of one transformer layer for a model preset at a number of prompt tokens,
 * {@code KVLayout.preset(model).layerBytes(tokens)} bytes. {@link dev.kvconnector.benchmarks.ShmCrossProcessBenchmark}
 * hands a layer between two JVMs through {@code shm:} beside two memcpys; {@code AgronaShmComparison} weighs Agrona
 * against plain FFM for the {@code shm:} store's primitives.
 */
package dev.kvconnector.benchmarks;
