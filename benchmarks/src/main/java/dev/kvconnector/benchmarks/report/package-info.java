/**
 * Turns JMH's JSON results into {@code REPORT.md} and a hand-written SVG chart: per-layer median latency, GB/s,
 * allocation per layer, and each backend's ratio to its physical floor and to its peer library, all from one run.
 */
package dev.kvconnector.benchmarks.report;
