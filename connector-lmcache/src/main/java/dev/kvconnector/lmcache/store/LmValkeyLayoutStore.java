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
import java.util.Locale;
import java.util.Set;

/**
 * {@code lmcache+valkey://} (and {@code lmcache+redis://}, {@code lmcache+valkeys://}, {@code lmcache+rediss://},
 * {@code lmcache+valkey+cluster://}, {@code lmcache+redis+cluster://}): LMCache v1's Redis layout over the
 * {@code valkey://} store of connector-valkey, so that kvconnector and LMCache instances share one cache.
 *
 * <p>A value is an LMCache chunk object, its RemoteMetadata followed by the KV bytes (what
 * {@code LmChunkCodec} lays out). The store splits it over two keys per chunk key {@code K}:
 * <table>
 *   <caption>keys per layout</caption>
 *   <tr><th>layout=</th><th>KV bytes</th><th>metadata</th><th>LMCache writer</th></tr>
 *   <tr><td>{@code redis-v1} (default)</td><td>{@code K + "kv_bytes"}</td><td>{@code K + "metadata"}</td>
 *       <td>v1 {@code redis://} (no separator)</td></tr>
 *   <tr><td>{@code valkey-legacy}</td><td>{@code K:kv_bytes}</td><td>{@code K:metadata}</td>
 *       <td>v1 {@code valkey://}, legacy form; on a cluster {@code {K}:kv_bytes} and {@code {K}:metadata}, so
 *       both keys share a slot</td></tr>
 * </table>
 * As LMCache does, a put writes the KV bytes before the metadata (one pipelined flush; a server handles a
 * connection's commands in order), and presence is the metadata key's: a reader that sees the metadata finds the
 * KV bytes. A KV key that is gone while its metadata remains (evicted apart) reads as a miss.
 *
 * <p>Options: {@code layout=redis-v1|valkey-legacy}, {@code metadata-groups=1} (the RemoteMetadata group count:
 * newer LMCache releases repeat dtype and shape per group); every other option goes to the valkey:// store.
 * {@code ifAbsent} puts check the metadata key first and are not atomic.
 */
public final class LmValkeyLayoutStore implements KVStore {
    /** Options this layout consumes; the rest go to the valkey:// store. */
    public static final Set<String> OPTIONS = Set.of("layout", "metadata-groups");
    private static final String SCHEME_NEEDS = "connector-valkey";

    /** Where the two keys of a chunk live. */
    public enum Layout {
        /** LMCache v1 {@code redis://}: {@code K + "kv_bytes"} and {@code K + "metadata"}. */
        REDIS_V1,
        /** LMCache v1 {@code valkey://}, legacy form: {@code K:kv_bytes} and {@code K:metadata}. */
        VALKEY_LEGACY
    }

    private final KVStore inner;
    private final String uri;
    private final Layout layout;
    private final boolean cluster;
    private final LmChunkFraming framing;
    private final Set<StoreCapability> capabilities;

    private LmValkeyLayoutStore(KVStore inner, String uri, Layout layout, boolean cluster, int groups) {
        this.inner = inner;
        this.uri = uri;
        this.layout = layout;
        this.cluster = cluster;
        this.framing = new LmChunkFraming(groups, uri);
        Set<StoreCapability> caps = EnumSet.noneOf(StoreCapability.class);
        for (StoreCapability c : inner.capabilities()) {
            if (c == StoreCapability.NATIVE_TTL || c == StoreCapability.BATCH
                    || c == StoreCapability.SHARED_ACROSS_PROCESSES || c == StoreCapability.REMOVE) {
                caps.add(c);
            }
        }
        this.capabilities = Set.copyOf(caps);
    }

    /**
     * Opens the layout over a valkey:// store (which connects at once).
     *
     * @throws KVException {@code INVALID_URI} for a bad {@code layout=} or {@code metadata-groups=}
     */
    public static LmValkeyLayoutStore open(StoreUri uri) {
        String name = uri.param("layout");
        Layout layout;
        if (name == null || name.equalsIgnoreCase("redis-v1")) {
            layout = Layout.REDIS_V1;
        } else if (name.equalsIgnoreCase("valkey-legacy")) {
            layout = Layout.VALKEY_LEGACY;
        } else {
            throw KVException.of(ErrorCode.INVALID_URI, "option layout=" + name + " is neither redis-v1 nor "
                    + "valkey-legacy").store(uri.masked()).build();
        }
        int groups = uri.intParam("metadata-groups", 1);
        if (groups < 1 || groups > 64) {
            throw KVException.of(ErrorCode.INVALID_URI, "option metadata-groups=" + groups + " must be within 1..64")
                    .store(uri.masked()).build();
        }
        KVStore inner = InnerStoreUri.open(uri, OPTIONS, SCHEME_NEEDS);
        return new LmValkeyLayoutStore(inner, uri.masked(), layout, uri.scheme().endsWith("+cluster"), groups);
    }

    /** The key holding chunk {@code key}'s KV bytes. */
    public String kvKey(String key) {
        return switch (layout) {
            case REDIS_V1 -> key + "kv_bytes";
            case VALKEY_LEGACY -> cluster ? "{" + key + "}:kv_bytes" : key + ":kv_bytes";
        };
    }

    /** The key holding chunk {@code key}'s RemoteMetadata. */
    public String metadataKey(String key) {
        return switch (layout) {
            case REDIS_V1 -> key + "metadata";
            case VALKEY_LEGACY -> cluster ? "{" + key + "}:metadata" : key + ":metadata";
        };
    }

    /** The layout in use. */
    public Layout layout() {
        return layout;
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
        boolean[] stored = new boolean[1];
        putBatch(new String[] {key}, new MemorySegment[] {value}, 1, options, stored);
        return stored[0];
    }

    /**
     * Writes every object's KV key, then every metadata key, in one pipelined batch of the valkey:// store. On a
     * cluster with {@code layout=redis-v1} the two keys of a chunk may live on different masters, whose batches
     * run in no fixed order, so there each object is written KV first, then metadata, one after the other.
     */
    @Override
    public void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        checkCount("putBatch", keys, count, values.length, stored.length);
        String[] innerKeys = new String[2 * count];
        MemorySegment[] parts = new MemorySegment[2 * count];
        int n = 0;
        for (int i = 0; i < count; i++) {
            long kv = framing.kvBytesOfValue(values[i], "put", keys[i]);
            if (options.ifAbsent() && inner.exists(metadataKey(keys[i]))) {
                stored[i] = false;
                continue;
            }
            stored[i] = true;
            innerKeys[n] = kvKey(keys[i]);
            parts[n] = values[i].asSlice(framing.metadataBytes(), kv);
            innerKeys[n + count] = metadataKey(keys[i]);
            parts[n + count] = values[i].asSlice(0, framing.metadataBytes());
            n++;
        }
        if (n == 0) {
            return;
        }
        if (n < count) {
            System.arraycopy(innerKeys, count, innerKeys, n, n);
            System.arraycopy(parts, count, parts, n, n);
        }
        PutOptions plain = options.withIfAbsent(false);
        if (cluster && layout == Layout.REDIS_V1) {
            for (int i = 0; i < n; i++) {
                inner.put(innerKeys[i], parts[i], plain);
                inner.put(innerKeys[n + i], parts[n + i], plain);
            }
            return;
        }
        inner.putBatch(innerKeys, parts, 2 * n, plain, new boolean[2 * n]);
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        long[] results = new long[1];
        getIntoBatch(new String[] {key}, new MemorySegment[] {dst}, 1, results);
        return results[0];
    }

    /**
     * Reads every object's metadata key and KV key in one pipelined batch, straight into each destination: the
     * metadata into its first bytes, the KV bytes after them.
     *
     * @throws KVException {@code CORRUPT_OBJECT} when a metadata key holds other than the expected header size, or
     *                     its length disagrees with the KV bytes found
     */
    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        checkCount("getIntoBatch", keys, count, dsts.length, results.length);
        int meta = framing.metadataBytes();
        String[] innerKeys = new String[2 * count];
        MemorySegment[] parts = new MemorySegment[2 * count];
        int[] index = new int[count];
        int n = 0;
        for (int i = 0; i < count; i++) {
            if (dsts[i].byteSize() < meta) {
                long size = size(keys[i]);
                results[i] = size < 0 ? GetResult.MISS : GetResult.tooSmall(size);
                continue;
            }
            index[n] = i;
            innerKeys[2 * n] = metadataKey(keys[i]);
            parts[2 * n] = dsts[i].asSlice(0, meta);
            innerKeys[2 * n + 1] = kvKey(keys[i]);
            parts[2 * n + 1] = dsts[i].asSlice(meta);
            n++;
        }
        if (n == 0) {
            return;
        }
        long[] got = new long[2 * n];
        inner.getIntoBatch(innerKeys, parts, 2 * n, got);
        for (int j = 0; j < n; j++) {
            int i = index[j];
            long m = got[2 * j];
            long kv = got[2 * j + 1];
            if (GetResult.isMiss(m) || GetResult.isMiss(kv)) {
                results[i] = GetResult.MISS;
            } else if (GetResult.isTooSmall(m) || m != meta) {
                throw framing.corrupt("the metadata key " + innerKeys[2 * j] + " holds "
                        + (GetResult.isTooSmall(m) ? GetResult.requiredSize(m) : m) + " bytes, not " + meta,
                        "get", keys[i]);
            } else if (GetResult.isTooSmall(kv)) {
                results[i] = GetResult.tooSmall(meta + GetResult.requiredSize(kv));
            } else {
                framing.checkRead(dsts[i], kv, "get", keys[i]);
                results[i] = meta + kv;
            }
        }
    }

    /** Metadata plus KV bytes, or -1 when either key is absent (two pipelined size requests each). */
    @Override
    public long size(String key) {
        long m = inner.size(metadataKey(key));
        if (m < 0) {
            return -1;
        }
        long kv = inner.size(kvKey(key));
        return kv < 0 ? -1 : m + kv;
    }

    /** Presence of the metadata key, as LMCache checks it. */
    @Override
    public boolean exists(String key) {
        return inner.exists(metadataKey(key));
    }

    /** Removes the metadata key first, so readers stop seeing the chunk before its KV bytes go. */
    @Override
    public boolean remove(String key) {
        boolean had = inner.remove(metadataKey(key));
        inner.remove(kvKey(key));
        return had;
    }

    @Override
    public int removeBatch(String[] keys, int count) {
        int n = 0;
        for (int i = 0; i < count; i++) {
            if (remove(keys[i])) {
                n++;
            }
        }
        return n;
    }

    @Override
    public String healthCheck() {
        return inner.healthCheck() + "; LMCache " + layout.name().toLowerCase(Locale.ROOT).replace('_', '-')
                + " layout, " + framing.metadataBytes() + "-byte metadata";
    }

    @Override
    public void close() {
        inner.close();
    }

    private void checkCount(String op, String[] keys, int count, int valuesLength, int resultsLength) {
        if (count < 0 || count > keys.length || count > valuesLength || count > resultsLength) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "count " + count + " is negative or exceeds an array"
                    + " (keys " + keys.length + ", values " + valuesLength + ", results " + resultsLength + ")")
                    .store(uri).operation(op).build();
        }
    }

    @Override
    public String toString() {
        return "LmValkeyLayoutStore[" + uri + "]";
    }
}
