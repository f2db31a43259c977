/**
 * {@code kvctl demo}: launches XpYd (X prefill and Y decode demo engines as child processes, the proxy and a
 * single-instance reference in-process), drives a workload through it and reports what the KV transfer did.
 */
package dev.kvconnector.demo.launcher;
