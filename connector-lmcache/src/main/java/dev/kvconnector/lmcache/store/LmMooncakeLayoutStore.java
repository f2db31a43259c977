package dev.kvconnector.lmcache.store;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreUri;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;

/**
 * {@code lmcache+mooncake://}: LMCache v1's {@code mooncakestore://} layout over the {@code mooncake://} store of
 * connector-mooncake. The Mooncake object key is the chunk key string itself, and the object is the RemoteMetadata
 * followed by the KV bytes, exactly the chunk object {@code LmChunkCodec} lays out, so this store stores it as
 * one object and checks the framing both ways: a put of anything else is {@code INVALID_ARGUMENT}, and an object
 * read back whose metadata disagrees with its size is {@code CORRUPT_OBJECT}.
 *
 * <p>Options: {@code metadata-groups=1} (the RemoteMetadata group count); every other option goes to the
 * mooncake:// store, whose zero-copy staging the puts and gets use as usual.
 */
public final class LmMooncakeLayoutStore implements KVStore {
    /** Options this layout consumes; the rest go to the mooncake:// store. */
    public static final Set<String> OPTIONS = Set.of("metadata-groups");

    private final KVStore inner;
    private final String uri;
    private final LmChunkFraming framing;
    private final Set<StoreCapability> capabilities;

    private LmMooncakeLayoutStore(KVStore inner, String uri, int groups) {
        this.inner = inner;
        this.uri = uri;
        this.framing = new LmChunkFraming(groups, uri);
        Set<StoreCapability> caps = EnumSet.noneOf(StoreCapability.class);
        caps.addAll(inner.capabilities());
        // Registration goes through MooncakeStore's RegisteredMemory, which this wrapper does not expose.
        caps.remove(StoreCapability.REGISTERED_MEMORY);
        // Claims and views would bypass the framing checks of put and get, which this wrapper does not forward.
        caps.remove(StoreCapability.CLAIM);
        caps.remove(StoreCapability.VIEW);
        this.capabilities = Set.copyOf(caps);
    }

    /**
     * Opens the layout over a mooncake:// store.
     *
     * @throws KVException {@code INVALID_URI} for a bad {@code metadata-groups=}
     */
    public static LmMooncakeLayoutStore open(StoreUri uri) {
        int groups = uri.intParam("metadata-groups", 1);
        if (groups < 1 || groups > 64) {
            throw KVException.of(ErrorCode.INVALID_URI, "option metadata-groups=" + groups + " must be within 1..64")
                    .store(uri.masked()).build();
        }
        return new LmMooncakeLayoutStore(InnerStoreUri.open(uri, OPTIONS, "connector-mooncake"), uri.masked(),
                groups);
    }

    @Override
    public String uri() {
        return uri;
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return capabilities;
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        framing.kvBytesOfValue(value, "put", key);
        return inner.put(key, value, options);
    }

    @Override
    public void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        for (int i = 0; i < count; i++) {
            framing.kvBytesOfValue(values[i], "putBatch", keys[i]);
        }
        inner.putBatch(keys, values, count, options, stored);
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        long r = inner.getInto(key, dst);
        check(key, dst, r);
        return r;
    }

    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        inner.getIntoBatch(keys, dsts, count, results);
        for (int i = 0; i < count; i++) {
            check(keys[i], dsts[i], results[i]);
        }
    }

    private void check(String key, MemorySegment dst, long r) {
        if (!GetResult.isHit(r)) {
            return;
        }
        if (r < framing.metadataBytes()) {
            throw framing.corrupt("the object has " + r + " bytes, fewer than the " + framing.metadataBytes()
                    + "-byte RemoteMetadata", "get", key);
        }
        framing.checkRead(dst, r - framing.metadataBytes(), "get", key);
    }

    @Override
    public long size(String key) {
        return inner.size(key);
    }

    @Override
    public boolean exists(String key) {
        return inner.exists(key);
    }

    @Override
    public boolean remove(String key) {
        return inner.remove(key);
    }

    @Override
    public int removeBatch(String[] keys, int count) {
        return inner.removeBatch(keys, count);
    }

    @Override
    public int removeConsumed(String[] keys, int count) {
        return inner.removeConsumed(keys, count);
    }

    @Override
    public String healthCheck() {
        return inner.healthCheck() + "; LMCache mooncakestore layout, " + framing.metadataBytes()
                + "-byte metadata before the KV bytes";
    }

    @Override
    public void close() {
        inner.close();
    }

    @Override
    public String toString() {
        return "LmMooncakeLayoutStore[" + uri + "]";
    }
}
