package dev.kvconnector.store.tiered;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A test double of a lower tier: a real store underneath, with the faults of a remote one switched on and off. It
 * can be down (every call throws {@code STORE_UNREACHABLE}, as a remote store's client does), hold every put until
 * {@link #openGate()} (a slow network), or declare no {@code REMOVE}.
 */
final class FaultyTier implements KVStore {
    private final KVStore inner;
    private final boolean removes;
    private volatile boolean down;
    private volatile CountDownLatch gate = new CountDownLatch(0);
    /** Puts that reached this tier, whether the gate let them through yet or not. */
    final AtomicInteger arrived = new AtomicInteger();
    /** Puts that went through. */
    final AtomicInteger puts = new AtomicInteger();
    /** Reads of one object ({@code getInto}) that reached this tier. */
    final AtomicInteger reads = new AtomicInteger();
    /** Batch reads ({@code getIntoBatch}) that reached this tier. */
    final AtomicInteger batchReads = new AtomicInteger();

    FaultyTier(KVStore inner, boolean removes) {
        this.inner = inner;
        this.removes = removes;
    }

    FaultyTier(KVStore inner) {
        this(inner, true);
    }

    void down(boolean isDown) {
        down = isDown;
    }

    /** Holds every put from now until {@link #openGate()}. */
    void closeGate() {
        gate = new CountDownLatch(1);
    }

    void openGate() {
        gate.countDown();
    }

    /** The store underneath, to read what this tier holds without the faults. */
    KVStore inner() {
        return inner;
    }

    private void check(String op) {
        if (down) {
            throw KVException.of(ErrorCode.STORE_UNREACHABLE, "connection refused (test double switched down)")
                    .store(uri()).operation(op).hint("is the server up?").build();
        }
    }

    @Override
    public String uri() {
        return "faulty:" + inner.uri();
    }

    @Override
    public Set<StoreCapability> capabilities() {
        Set<StoreCapability> caps = EnumSet.of(StoreCapability.NATIVE_TTL);
        if (removes) {
            caps.add(StoreCapability.REMOVE);
        }
        return caps;
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        arrived.incrementAndGet();
        try {
            if (!gate.await(30, TimeUnit.SECONDS)) {
                throw new AssertionError("the test never opened the gate");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw KVException.of(ErrorCode.IO_ERROR, "interrupted").store(uri()).build();
        }
        check("put");
        puts.incrementAndGet();
        return inner.put(key, value, options);
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        reads.incrementAndGet();
        check("getInto");
        return inner.getInto(key, dst);
    }

    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        batchReads.incrementAndGet();
        check("getIntoBatch");
        inner.getIntoBatch(keys, dsts, count, results);
    }

    @Override
    public long size(String key) {
        check("size");
        return inner.size(key);
    }

    @Override
    public boolean remove(String key) {
        if (!removes) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "no remove").store(uri()).build();
        }
        check("remove");
        return inner.remove(key);
    }

    @Override
    public String healthCheck() {
        check("healthCheck");
        return uri() + " answered";
    }

    @Override
    public void close() {
        inner.close();
    }
}
