package dev.kvconnector.connector;

import dev.kvconnector.events.KvEventEmitter;
import dev.kvconnector.events.RemovalReason;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.StoreKey;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Tells a connector's KV event listener what its store tells about the connector's objects: a removal, eviction or
 * expiry of any object of a chunk (its layers, hidden states or manifest, by {@link KeyScheme#chunkHashOf}) becomes
 * one {@code KvEvent.Removed} of that chunk with the store's reason, since a chunk missing any object can no longer
 * be loaded. A store's gap (or new epoch) becomes a gap in the connector's own numbers, so the listener
 * resynchronises.
 *
 * <p>A chunk is told once: its later objects' removals are not told again until the store tells that the chunk was
 * stored again. The chunks the connector itself consumes are told by it (as {@code CONSUMED}), so they are marked
 * before their removal ({@link #consuming}) and their removals are not told a second time; the store's events of the
 * chunk's storing that arrive after the mark (the store's events lag its changes) do not clear it, only a storing
 * told after its removal does. Events that name another
 * store than the connector's (a {@code tiered:} store's events about one of its tiers) are not told: only what left
 * the store as a whole matters to a reader of it. Keys of other schemes are ignored.
 */
final class StoreEventForwarder implements StoreEventListener {
    /** Chunks remembered as told, oldest forgotten first: bounds the memory (about 150 bytes each). */
    static final int TOLD_CHUNKS = 16_384;

    private final KvEventEmitter emitter;
    private final KeyScheme scheme;
    private final String storeUri;
    /** What was told of a chunk. */
    private enum Told {
        /** Its removal was told. */
        REMOVED,
        /** The connector consumes it: it tells that itself. */
        CONSUMING,
        /** The connector consumed it and the store told a removal since. */
        CONSUMED
    }

    private final Map<String, Told> told = new LinkedHashMap<>(1024, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Told> eldest) {
            return size() > TOLD_CHUNKS;
        }
    };
    private StoreEvent last;

    StoreEventForwarder(KvEventEmitter emitter, KeyScheme scheme, String storeUri) {
        this.emitter = emitter;
        this.scheme = scheme;
        this.storeUri = storeUri;
    }

    @Override
    public void onEvent(StoreEvent event) {
        String hash;
        synchronized (this) {
            if (last != null && !last.isFollowedBy(event)) {
                emitter.gap();
            }
            last = event;
            if (!storeUri.equals(event.storeUri()) || (hash = scheme.chunkHashOf(event.key())) == null) {
                return;
            }
            Told before = told.get(hash);
            if (event.type() == StoreEvent.Type.STORED) {
                if (before != Told.CONSUMING) {
                    told.remove(hash);
                }
                return;
            }
            if (before != null) {
                if (before != Told.REMOVED) {
                    told.put(hash, Told.CONSUMED);
                }
                return;
            }
            told.put(hash, Told.REMOVED);
        }
        emitter.removed(hash, switch (event.type()) {
            case EVICTED -> RemovalReason.EVICTED;
            case EXPIRED -> RemovalReason.EXPIRED;
            default -> RemovalReason.REMOVED;
        });
    }

    /** Marks the chunks of {@code keys} as told: the connector is about to remove them and tells it itself. */
    synchronized void consuming(StoreKey[] keys, int count) {
        for (int i = 0; i < count; i++) {
            String hash = scheme.chunkHashOf(keys[i].toString());
            if (hash != null) {
                told.put(hash, Told.CONSUMING);
            }
        }
    }
}
