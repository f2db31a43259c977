/**
 * The {@code tiered:} store: an ordered list of stores, fastest first, that reads top-down, promotes on hit,
 * writes through or back, retries what a lower tier that was down missed, and tells each tier's events. {@link dev.kvconnector.store.tiered.TieredStore} states the rules;
 * {@link dev.kvconnector.store.tiered.TieredOptions} the URI options.
 *
 * <pre>{@code
 * tiered:[shm:/kv?capacity=8GiB][valkey+cluster://h1:6379,h2:6379]?write=back&promote=on-hit
 * }</pre>
 */
package dev.kvconnector.store.tiered;
