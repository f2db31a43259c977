/**
 * JMH benchmarks of per-layer KV transfer latency: every store beside its physical floor (memcpy for in-process
 * stores, a raw loopback socket for network stores) and beside the library a user would otherwise pick (Lettuce,
 * Jedis, Chronicle Bytes), plus {@link dev.kvconnector.benchmarks.report.ReportMain}, which turns JMH's JSON into
 * the report. One "layer" is K and V of one transformer layer for a model preset at a number of prompt tokens,
 * {@code KVLayout.preset(model).layerBytes(tokens)} bytes.
 */
package dev.kvconnector.benchmarks;
