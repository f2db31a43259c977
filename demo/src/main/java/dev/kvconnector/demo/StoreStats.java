package dev.kvconnector.demo;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.tiered.TierStats;
import dev.kvconnector.store.tiered.TieredStore;
import dev.kvconnector.store.tiered.WriteBackStats;

/**
 * The {@code store} object of an engine's {@code GET /kv/metrics}: the store's URI (secrets masked) and, for a
 * {@code tiered:} store, each tier's counters, fastest first, and its write-back's:
 *
 * <pre>{@code
 * "store": {"uri": "tiered:[shm:/kv][valkey://h:6379]",
 *           "tiers": [{"uri", "hits", "errors", "promotions", "bytes_read", "bytes_written"}, ...],
 *           "write_back": {"depth", "capacity", "written", "dropped", "lost", "failed", "refused"}}
 * }</pre>
 * Sizes in bytes, counts since the store opened. Other stores keep no counters of their own; the connector's
 * ({@code connector.inserted_bytes}, {@code connector.dropped_bytes}) say what went through them.
 *
 * <p>This reads a {@link TieredStore}'s counters by its class: that is reporting, not a data path, and the
 * {@code KVStore} interface has no counters to ask for.
 */
final class StoreStats {
    private StoreStats() {
    }

    /** Writes {@code store}'s URI and, for a tiered store, its tiers and write-back into {@code out}. */
    static void write(KVStore store, ObjectNode out) {
        out.put("uri", store.uri());
        if (!(store instanceof TieredStore tiered)) {
            return;
        }
        ArrayNode tiers = out.putArray("tiers");
        for (TierStats.Snapshot t : tiered.tierStats()) {
            tiers.addObject().put("uri", t.uri()).put("hits", t.hits()).put("errors", t.errors())
                    .put("promotions", t.promotions()).put("bytes_read", t.bytesRead())
                    .put("bytes_written", t.bytesWritten());
        }
        WriteBackStats w = tiered.writeBackStats();
        out.putObject("write_back").put("depth", w.depth()).put("capacity", w.capacity()).put("written", w.written())
                .put("dropped", w.dropped()).put("lost", w.lost()).put("failed", w.failed()).put("refused", w.refused());
    }
}
