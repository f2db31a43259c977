package dev.kvconnector.connector;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreRead;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A test double: a real store behind it, declaring only the capabilities the test gives, and counting the calls of
 * each path so that a test can tell which one the connector took.
 */
final class CountingStoreTestDouble implements KVStore {
    final AtomicInteger claims = new AtomicInteger();
    final AtomicInteger views = new AtomicInteger();
    final AtomicInteger putBatches = new AtomicInteger();
    final AtomicInteger getIntos = new AtomicInteger();
    final AtomicInteger removes = new AtomicInteger();
    final AtomicInteger immutablePutBatches = new AtomicInteger();
    /** Batch reads sent ahead ({@code sendGetIntoBatch}). */
    final AtomicInteger sentReads = new AtomicInteger();
    /** The batch read (1 for the first, sent ahead or not) whose first object's last byte comes back flipped. */
    volatile int corruptBatchRead;
    /** When set, the await of every batch read sent ahead throws it, as a server that died meanwhile would. */
    volatile RuntimeException awaitFailure;
    private final AtomicInteger batchReads = new AtomicInteger();
    /** When set, every batch put throws it, as a store that went down would. */
    volatile RuntimeException putFailure;
    private final KVStore inner;
    private final Set<StoreCapability> capabilities;

    CountingStoreTestDouble(KVStore inner, Set<StoreCapability> capabilities) {
        this.inner = inner;
        this.capabilities = EnumSet.copyOf(capabilities);
    }

    @Override
    public String uri() {
        return inner.uri();
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return capabilities;
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        return inner.put(key, value, options);
    }

    @Override
    public void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        putBatches.incrementAndGet();
        RuntimeException f = putFailure;
        if (f != null) {
            throw f;
        }
        if (options.immutable()) {
            immutablePutBatches.incrementAndGet();
        }
        inner.putBatch(keys, values, count, options, stored);
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        getIntos.incrementAndGet();
        return inner.getInto(key, dst);
    }

    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        getIntos.incrementAndGet();
        read(keys, dsts, count, results);
    }

    private void read(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        inner.getIntoBatch(keys, dsts, count, results);
        if (batchReads.incrementAndGet() == corruptBatchRead && count > 0 && results[0] > 0) {
            long last = results[0] - 1;
            dsts[0].set(ValueLayout.JAVA_BYTE, last, (byte) ~dsts[0].get(ValueLayout.JAVA_BYTE, last));
        }
    }

    @Override
    public StoreRead newRead() {
        return new PendingRead();
    }

    /** Records the batch; {@link StoreRead#await} reads it from the store behind. */
    @Override
    public void sendGetIntoBatch(String[] keys, MemorySegment[] dsts, int count, StoreRead read) {
        sentReads.incrementAndGet();
        ((PendingRead) read).send(keys, dsts, count);
    }

    /** A batch recorded at its send and read at its await. */
    private final class PendingRead implements StoreRead {
        private String[] keys;
        private MemorySegment[] dsts;
        private int count = -1;

        void send(String[] k, MemorySegment[] d, int n) {
            keys = k;
            dsts = d;
            count = n;
        }

        @Override
        public boolean isPending() {
            return count >= 0;
        }

        @Override
        public void await(long[] results) {
            int n = count;
            count = -1;
            RuntimeException f = awaitFailure;
            if (f != null) {
                throw f;
            }
            read(keys, dsts, n, results);
        }
    }

    @Override
    public long size(String key) {
        return inner.size(key);
    }

    @Override
    public boolean remove(String key) {
        removes.incrementAndGet();
        return inner.remove(key);
    }

    @Override
    public int removeBatch(String[] keys, int count) {
        removes.incrementAndGet();
        return inner.removeBatch(keys, count);
    }

    @Override
    public int removeConsumed(String[] keys, int count) {
        removes.incrementAndGet();
        return inner.removeConsumed(keys, count);
    }

    @Override
    public StoreClaim newClaim() {
        return inner.newClaim();
    }

    @Override
    public int tryClaim(String key, long bytes, PutOptions options, StoreClaim claim) {
        claims.incrementAndGet();
        return inner.tryClaim(key, bytes, options, claim);
    }

    @Override
    public StoreView newView() {
        return inner.newView();
    }

    @Override
    public long tryView(String key, StoreView view) {
        views.incrementAndGet();
        return inner.tryView(key, view);
    }

    @Override
    public void close() {
        inner.close();
    }
}
