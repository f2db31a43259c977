package dev.kvconnector.lmcache.connector;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.UnaryOperator;

/**
 * One engine's LMCache connector in tests: the one connector ({@link StoreConnector}) configured by
 * {@link LmCacheConnectors}, over the test's store seen through a wrapper that counts the objects put, so that a
 * test can tell how many chunks an insert wrote.
 */
final class LmEngine implements AutoCloseable {
    final StoreConnector connector;
    private final KeyScheme scheme;
    private final AtomicLong puts = new AtomicLong();

    private LmEngine(KVStore store, KVLayout layout, UnaryOperator<LmCacheConnectors.Builder> config) {
        LmCacheConnectors.Builder b = config.apply(LmCacheConnectors.builder(new Counting(store), layout)
                .modelId("test/model"));
        this.scheme = b.keyScheme();
        this.connector = b.build();
    }

    static LmEngine of(KVStore store, KVLayout layout, UnaryOperator<LmCacheConnectors.Builder> config) {
        return new LmEngine(store, layout, config);
    }

    /** Inserts every layer of the prompt from the paged cache; returns the chunk objects written. */
    int insert(RequestTokens prompt, PagedKVCache cache, TokenSlots slots) {
        long before = puts.get();
        try (InsertSession s = connector.beginInsert(prompt)) {
            s.putLayers(LayerSource.paged(cache, slots));
            s.commit();
        }
        return (int) (puts.get() - before);
    }

    int lookup(RequestTokens prompt) {
        return connector.lookup(prompt);
    }

    DropResult dropSelect(RequestTokens prompt, PagedKVCache cache, TokenSlots slots) {
        return connector.dropSelect(prompt, DropTarget.paged(cache, slots));
    }

    /** The prompt's chunk keys, in token order. */
    List<String> keys(RequestTokens prompt) {
        return scheme.plan(connector.keyContext(), prompt).chunks().stream().map(c -> c.layerKeys()[0]).toList();
    }

    /** The prompt's chunks. */
    List<ChunkKeys> chunks(RequestTokens prompt) {
        return scheme.plan(connector.keyContext(), prompt).chunks();
    }

    @Override
    public void close() {
        connector.close();
    }

    /** Counts puts, and otherwise is the store. */
    private final class Counting implements KVStore {
        private final KVStore store;

        Counting(KVStore store) {
            this.store = store;
        }

        @Override
        public String uri() {
            return store.uri();
        }

        @Override
        public Set<StoreCapability> capabilities() {
            return store.capabilities();
        }

        @Override
        public boolean put(String key, MemorySegment value, PutOptions options) {
            puts.incrementAndGet();
            return store.put(key, value, options);
        }

        @Override
        public void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
            puts.addAndGet(count);
            store.putBatch(keys, values, count, options, stored);
        }

        @Override
        public long getInto(String key, MemorySegment dst) {
            return store.getInto(key, dst);
        }

        @Override
        public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
            store.getIntoBatch(keys, dsts, count, results);
        }

        @Override
        public long size(String key) {
            return store.size(key);
        }

        @Override
        public boolean exists(String key) {
            return store.exists(key);
        }

        @Override
        public boolean remove(String key) {
            return store.remove(key);
        }

        @Override
        public int removeBatch(String[] keys, int count) {
            return store.removeBatch(keys, count);
        }

        @Override
        public int removeConsumed(String[] keys, int count) {
            return store.removeConsumed(keys, count);
        }

        @Override
        public void close() {
            store.close();
        }
    }
}
