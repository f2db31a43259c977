/**
 * Composition of connectors, vLLM's {@code MultiConnector} pattern: {@link
 * dev.kvconnector.connector.multi.MultiConnector} inserts into every connector and loads from the one that holds
 * the request, so that a peer-to-peer path moves the request in flight while a store keeps its KV for prefix reuse.
 */
package dev.kvconnector.connector.multi;
