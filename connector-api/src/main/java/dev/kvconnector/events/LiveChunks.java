package dev.kvconnector.events;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The chunks a publisher reported stored and not removed since, for its snapshots: every event is applied when the
 * connector emits it, before the publisher's queue, so that an event the full queue drops still changes what the
 * next snapshot holds. A snapshot may then hold events not sent yet; they follow it with higher numbers, and since
 * each event sets a chunk's state, a subscriber that applies them again ends where the publisher is.
 *
 * <p>Bounded: past {@code capacity} chunks the oldest stored is forgotten. Thread-safe; {@link #apply} holds the
 * lock for one map update, {@link #snapshot} for one copy of the chunks.
 */
final class LiveChunks {
    private final LinkedHashMap<String, KvEvent.Stored> chunks;

    LiveChunks(int capacity) {
        this.chunks = new LinkedHashMap<>(16, 0.75f, false) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, KvEvent.Stored> eldest) {
                return size() > capacity;
            }
        };
    }

    /** Applies one event: a store adds its chunk, a removal or a failed load of a chunk drops it, a clear empties. */
    synchronized void apply(KvEvent e) {
        switch (e) {
            case KvEvent.Stored s -> chunks.put(key(s.storeUri(), s.chunkHash()), s);
            case KvEvent.Removed r -> chunks.remove(key(r.storeUri(), r.chunkHash()));
            case KvEvent.LoadFailed f -> {
                if (f.chunkHash() != null) {
                    chunks.remove(key(f.storeUri(), f.chunkHash()));
                }
            }
            case KvEvent.AllCleared c -> chunks.clear();
        }
    }

    /** The chunks held now, the oldest stored first. */
    synchronized List<KvEvent.Stored> snapshot() {
        return new ArrayList<>(chunks.values());
    }

    private static String key(String storeUri, String chunkHash) {
        return storeUri + '\0' + chunkHash;
    }
}
