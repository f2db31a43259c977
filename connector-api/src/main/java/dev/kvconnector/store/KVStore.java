package dev.kvconnector.store;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.util.Set;

/**
 * A store of byte objects under string keys. Backends know nothing of tensors.
 *
 * <p>Implementations are thread-safe. Values are copied out of the caller's segment during {@link #put} and into
 * the caller's segment during {@link #getInto}; the store keeps no reference to either. Misses are results, not
 * exceptions; failures throw {@link KVException}.
 *
 * <p>Zero-copy, where the store declares it: with {@link StoreCapability#CLAIM} a writer fills the store's own memory
 * through {@link #tryClaim} and publishes it with {@link StoreClaim#commit()}; with {@link StoreCapability#VIEW} a
 * reader reads the stored bytes in place through {@link #tryView} until {@link StoreView#release()}. Callers choose
 * these paths by {@link #capabilities()}, never by the store's class, and fall back to {@link #put} and
 * {@link #getInto} otherwise.
 *
 * <p>Keys come as {@code String}s or, on the connector's per-request path, as {@link StoreKey}s: the same key's UTF-8
 * bytes in a buffer the caller refills, so that a request of new content builds no string. By default a
 * {@code StoreKey} method turns the key into its string and calls the {@code String} method (one string per call); a
 * store that indexes or sends keys as bytes overrides them to allocate nothing. Both forms of a key name the same
 * object.
 */
public interface KVStore extends AutoCloseable {

    /** The URI this store was opened with, secrets masked. */
    String uri();

    /** What this store can do beyond the basics. */
    Set<StoreCapability> capabilities();

    /**
     * Stores {@code value} under {@code key}.
     *
     * @return true when stored; false only when {@code options.ifAbsent()} and the key already existed
     */
    boolean put(String key, MemorySegment value, PutOptions options);

    /** {@link #put(String, MemorySegment, PutOptions)} under the key {@code key} holds. */
    default boolean put(StoreKey key, MemorySegment value, PutOptions options) {
        return put(key.toString(), value, options);
    }

    /**
     * Copies the object into {@code dst} (from offset 0).
     *
     * @return a {@link GetResult} code: bytes copied, a miss, or too-small with the object's size
     */
    long getInto(String key, MemorySegment dst);

    /** {@link #getInto(String, MemorySegment)} under the key {@code key} holds. */
    default long getInto(StoreKey key, MemorySegment dst) {
        return getInto(key.toString(), dst);
    }

    /** The object's size in bytes, or -1 when absent. */
    long size(String key);

    /** Whether the key exists. */
    default boolean exists(String key) {
        return size(key) >= 0;
    }

    /**
     * Removes the key; returns whether it existed.
     *
     * @throws KVException {@code UNSUPPORTED} from a store that does not declare {@link StoreCapability#REMOVE}
     */
    boolean remove(String key);

    /**
     * A handle for {@link #tryClaim}, to be reused for claim after claim by one producer thread.
     *
     * @throws KVException {@code UNSUPPORTED} from a store that does not declare {@link StoreCapability#CLAIM}
     */
    default StoreClaim newClaim() {
        throw unsupported(StoreCapability.CLAIM, "newClaim");
    }

    /**
     * Reserves {@code bytes} bytes of the store's own memory under {@code key} and hands them to {@code claim} for
     * the caller to write, then {@link StoreClaim#commit()} or {@link StoreClaim#abort()}. Until the commit, readers
     * see the key's previous value or a miss. Back-pressure is a code, not an exception.
     *
     * @param bytes the value's exact size in bytes, at least 0
     * @param options TTL and if-absent as for {@link #put}; {@code ifAbsent} is checked here and again at commit
     * @param claim an empty handle from this store's {@link #newClaim()}
     * @return {@link ClaimResult#CLAIMED}, {@link ClaimResult#FULL} (no room now, nothing reserved) or
     *     {@link ClaimResult#EXISTS} (if-absent and the key is live)
     * @throws KVException {@code UNSUPPORTED} without {@link StoreCapability#CLAIM}; {@code VALUE_TOO_LARGE} when
     *     {@code bytes} can never fit; {@code INVALID_ARGUMENT} when the handle already holds a claim or belongs to
     *     another store; {@code CLOSED}
     */
    default int tryClaim(String key, long bytes, PutOptions options, StoreClaim claim) {
        throw unsupported(StoreCapability.CLAIM, "tryClaim");
    }

    /** {@link #tryClaim(String, long, PutOptions, StoreClaim)} under the key {@code key} holds. */
    default int tryClaim(StoreKey key, long bytes, PutOptions options, StoreClaim claim) {
        return tryClaim(key.toString(), bytes, options, claim);
    }

    /**
     * A handle for {@link #tryView}, to be reused for read after read by one consumer thread.
     *
     * @throws KVException {@code UNSUPPORTED} from a store that does not declare {@link StoreCapability#VIEW}
     */
    default StoreView newView() {
        throw unsupported(StoreCapability.VIEW, "newView");
    }

    /**
     * Reads the object under {@code key} in place: on a hit, {@code view} holds a read-only segment over the
     * store's memory until {@link StoreView#release()}, and no remove, replace or eviction frees those bytes before.
     *
     * @param view an empty handle from this store's {@link #newView()}
     * @return the object's size in bytes (a hit, {@code view} holds it), or {@link GetResult#MISS} ({@code view}
     *     stays empty)
     * @throws KVException {@code UNSUPPORTED} without {@link StoreCapability#VIEW}; {@code INVALID_ARGUMENT} when
     *     the handle already holds an object or belongs to another store; {@code CLOSED}
     */
    default long tryView(String key, StoreView view) {
        throw unsupported(StoreCapability.VIEW, "tryView");
    }

    /** {@link #tryView(String, StoreView)} under the key {@code key} holds. */
    default long tryView(StoreKey key, StoreView view) {
        return tryView(key.toString(), view);
    }

    private KVException unsupported(StoreCapability capability, String operation) {
        return KVException.of(ErrorCode.UNSUPPORTED, "this store does not declare " + capability).store(uri())
                .operation(operation).hint("check store.capabilities() before taking the " + capability
                        + " path; use put/getInto otherwise").build();
    }

    /**
     * Puts {@code count} values; {@code stored[i]} receives the result of each put. The default loops; stores
     * that declare {@link StoreCapability#BATCH} do it in one round trip.
     */
    default void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        for (int i = 0; i < count; i++) {
            stored[i] = put(keys[i], values[i], options);
        }
    }

    /** {@link #putBatch(String[], MemorySegment[], int, PutOptions, boolean[])} under the keys {@code keys} hold. */
    default void putBatch(StoreKey[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        putBatch(strings(keys, count), values, count, options, stored);
    }

    /** Gets {@code count} objects; {@code results[i]} receives each {@link GetResult} code. */
    default void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        for (int i = 0; i < count; i++) {
            results[i] = getInto(keys[i], dsts[i]);
        }
    }

    /** {@link #getIntoBatch(String[], MemorySegment[], int, long[])} under the keys {@code keys} hold. */
    default void getIntoBatch(StoreKey[] keys, MemorySegment[] dsts, int count, long[] results) {
        getIntoBatch(strings(keys, count), dsts, count, results);
    }

    /**
     * A handle for {@link #sendGetIntoBatch}, reused batch after batch by one thread.
     *
     * @throws KVException {@code UNSUPPORTED} from a store that does not declare {@link StoreCapability#PIPELINED_READ}
     */
    default StoreRead newRead() {
        throw unsupported(StoreCapability.PIPELINED_READ, "newRead");
    }

    /**
     * Sends a batch read of {@code count} objects into {@code dsts} and returns without waiting for the answers;
     * {@link StoreRead#await} reads them. Until then the destinations belong to the store.
     *
     * @param read a handle from this store's {@link #newRead()} with no batch pending
     * @throws KVException {@code UNSUPPORTED} without {@link StoreCapability#PIPELINED_READ}; {@code INVALID_ARGUMENT}
     *     when the handle has a batch pending; what {@link #getIntoBatch} throws for a request it cannot send
     */
    default void sendGetIntoBatch(String[] keys, MemorySegment[] dsts, int count, StoreRead read) {
        throw unsupported(StoreCapability.PIPELINED_READ, "sendGetIntoBatch");
    }

    /** {@link #sendGetIntoBatch(String[], MemorySegment[], int, StoreRead)} under the keys {@code keys} hold. */
    default void sendGetIntoBatch(StoreKey[] keys, MemorySegment[] dsts, int count, StoreRead read) {
        sendGetIntoBatch(strings(keys, count), dsts, count, read);
    }

    /** Removes {@code count} keys; returns how many existed. */
    default int removeBatch(String[] keys, int count) {
        int n = 0;
        for (int i = 0; i < count; i++) {
            if (remove(keys[i])) {
                n++;
            }
        }
        return n;
    }

    /**
     * Removes {@code count} objects that the caller has just read in full and will not read again (a consuming
     * drop-select). Stores whose reads grant the reader a lease that blocks removal (Mooncake) override this to
     * remove past the lease the caller's own read took, instead of waiting it out; the others remove as
     * {@link #removeBatch} does.
     *
     * @return how many existed
     */
    default int removeConsumed(String[] keys, int count) {
        return removeBatch(keys, count);
    }

    /** {@link #removeConsumed(String[], int)} of the keys {@code keys} hold. */
    default int removeConsumed(StoreKey[] keys, int count) {
        return removeConsumed(strings(keys, count), count);
    }

    private static String[] strings(StoreKey[] keys, int count) {
        String[] strings = new String[count];
        for (int i = 0; i < count; i++) {
            strings[i] = keys[i].toString();
        }
        return strings;
    }

    /**
     * Subscribes {@code listener} to this store's events: from now on it hears of every object stored, removed,
     * evicted or expired in the store, by this process or (for a shared store) any other, on a thread of the
     * subscription's own, in order. Events from before the call are not replayed.
     *
     * @param errors receives what fails on the subscription's thread: a listener that threw, a lost connection
     * @return the subscription, to close when done (the store's close closes it too)
     * @throws KVException {@code UNSUPPORTED} from a store that does not declare {@link StoreCapability#EVENTS};
     *     {@code CLOSED}
     */
    default StoreSubscription subscribe(StoreEventListener listener, ErrorHandler errors) {
        throw unsupported(StoreCapability.EVENTS, "subscribe");
    }

    /**
     * Where this store reports the failures it absorbs instead of throwing them (a lower tier of a {@code tiered:}
     * store that is down while the first tier serves the call) and those on threads of its own. By default a store
     * logs them ({@link ErrorHandler#LOGGING}); a store that never absorbs a failure ignores this.
     */
    default void errorHandler(ErrorHandler handler) {
    }

    /**
     * Checks, before any request, that readers may remove what they read (a consume-mode drop-select) from this
     * store: a store whose configuration contradicts it (a {@code tiered:} store none of whose tiers can remove)
     * throws {@code INVALID_CONFIG} naming why. By default nothing: a store without {@link StoreCapability#REMOVE}
     * keeps consumed objects until it evicts them, which the connector logs once.
     */
    default void checkConsumeMode() {
    }

    /** Checks that the store is reachable and healthy, and describes what was checked. Throws when it is not. */
    default String healthCheck() {
        exists("kvconnector:health-probe");
        return uri() + " answered";
    }

    /** Releases connections and memory. Later calls fail with {@code CLOSED}. Idempotent. */
    @Override
    void close();
}
