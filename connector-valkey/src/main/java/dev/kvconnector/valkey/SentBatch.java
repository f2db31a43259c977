package dev.kvconnector.valkey;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreRead;
import java.lang.foreign.MemorySegment;

/**
 * The {@link StoreRead} state and checks that {@link ValkeyStore} and {@link ValkeyClusterStore} share: which store
 * made the handle, the batch sent, and whether it waits for its await. Each store reads the batch its own way.
 */
abstract class SentBatch implements StoreRead {
    private static final String OP = "getIntoBatch";

    private final KVStore store;
    String[] keys;
    MemorySegment[] dsts;
    int count;
    private boolean pending;

    SentBatch(KVStore store) {
        this.store = store;
    }

    /**
     * {@code read} as a handle of {@code store} with no batch pending.
     *
     * @throws KVException {@code INVALID_ARGUMENT} for a handle of another store, or one with a batch pending
     */
    static SentBatch free(StoreRead read, KVStore store) {
        if (!(read instanceof SentBatch b) || b.store != store) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the read handle is not from this store's newRead()")
                    .store(store.uri()).operation(OP).build();
        }
        if (b.pending) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the read handle has a batch pending: await it first")
                    .store(store.uri()).operation(OP).build();
        }
        return b;
    }

    /** Records the batch sent; it waits for its {@link #await}. */
    final void sent(String[] k, MemorySegment[] d, int n) {
        keys = k;
        dsts = d;
        count = n;
        pending = true;
    }

    @Override
    public final boolean isPending() {
        return pending;
    }

    @Override
    public final void await(long[] results) {
        if (!pending) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "no batch read was sent on this handle")
                    .store(store.uri()).operation(OP).build();
        }
        pending = false;
        read(results);
    }

    /** Reads the batch sent into its destinations; the handle is already free for the next one. */
    abstract void read(long[] results);
}
