package dev.kvconnector.lmcache.store;

import dev.kvconnector.lmcache.client.LmStore;
import dev.kvconnector.lmcache.format.LmRemoteMetadata;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreUri;
import java.lang.foreign.MemorySegment;
import java.util.Set;

/**
 * {@code lmcache+lm://host:port}: LMCache v1 chunk objects (the 28-byte RemoteMetadata, then the KV bytes) on an
 * LMCache server, stored as LMCache's lm connector stores them. Over protocol v1 the metadata travels in the PUT
 * request header and comes back in the GET reply header, and the server holds the KV bytes alone; over protocol v0,
 * whose header has no such fields, the object is stored as it is. Every option is {@code lm://}'s.
 *
 * <p>A put of anything but a chunk object is {@code INVALID_ARGUMENT}; an object read back whose metadata
 * disagrees with its size is {@code CORRUPT_OBJECT}. Batches run one key at a time (the lm:// pipelining is not
 * used here). The protocol has no delete: remove is {@code UNSUPPORTED}, as on {@code lm://}.
 */
public final class LmServerLayoutStore implements KVStore {
    private static final int META = LmRemoteMetadata.SINGLE_GROUP_BYTES;

    private final LmStore server;
    private final String uri;
    private final boolean headerMetadata;
    private final LmChunkFraming framing;

    private LmServerLayoutStore(LmStore server, String uri) {
        this.server = server;
        this.uri = uri;
        this.headerMetadata = server.protocol() == LmProtocolVersion.V1;
        this.framing = new LmChunkFraming(1, uri);
    }

    /** Opens the layout over the LMCache server that {@code lmcache+lm://} names. */
    public static LmServerLayoutStore open(StoreUri uri) {
        return new LmServerLayoutStore(new LmStore(StoreUri.parse(InnerStoreUri.text(uri, "lm", Set.of()))),
                uri.masked());
    }

    @Override
    public String uri() {
        return uri;
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return server.capabilities();
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        framing.kvBytesOfValue(value, "put", key);
        if (!headerMetadata) {
            return server.put(key, value, options);
        }
        if (options.ifAbsent() && server.exists(key)) {
            return false;
        }
        LmRemoteMetadata m = LmRemoteMetadata.decode(value, 0, 1);
        LmRemoteMetadata.Group g = m.groups().getFirst();
        server.put(key, value.asSlice(META), new LmObjectMeta(m.fmt(), g.dtype(), g.shape0(), g.shape1(),
                g.shape2(), g.shape3()));
        return true;
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        if (!headerMetadata) {
            long r = server.getInto(key, dst);
            checkRead(key, dst, r);
            return r;
        }
        if (dst.byteSize() < META) {
            long size = size(key);
            return size < 0 ? GetResult.MISS : GetResult.tooSmall(size);
        }
        LmReplyHeader reply = new LmReplyHeader();
        long r = server.getInto(key, dst.asSlice(META), reply);
        if (GetResult.isMiss(r)) {
            return r;
        }
        if (GetResult.isTooSmall(r)) {
            return GetResult.tooSmall(GetResult.requiredSize(r) + META);
        }
        LmObjectMeta m = reply.meta();
        LmRemoteMetadata.of(reply.length(), m.fmt(), m.dtype(), m.shape0(), m.shape1(), m.shape2(), m.shape3())
                .encode(dst, 0);
        checkRead(key, dst, r + META);
        return r + META;
    }

    private void checkRead(String key, MemorySegment dst, long r) {
        if (!GetResult.isHit(r)) {
            return;
        }
        if (r < META) {
            throw framing.corrupt("the object has " + r + " bytes, fewer than the " + META + "-byte RemoteMetadata",
                    "get", key);
        }
        framing.checkRead(dst, r - META, "get", key);
    }

    @Override
    public long size(String key) {
        long s = server.size(key);
        return s < 0 || !headerMetadata ? s : s + META;
    }

    @Override
    public boolean exists(String key) {
        return server.exists(key);
    }

    @Override
    public boolean remove(String key) {
        return server.remove(key);
    }

    @Override
    public String healthCheck() {
        return server.healthCheck() + "; LMCache chunk objects, the RemoteMetadata "
                + (headerMetadata ? "in the protocol header" : "inside the object (protocol v0)");
    }

    @Override
    public void close() {
        server.close();
    }

    @Override
    public String toString() {
        return "LmServerLayoutStore[" + uri + "]";
    }
}
