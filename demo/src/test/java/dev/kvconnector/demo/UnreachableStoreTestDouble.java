package dev.kvconnector.demo;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import java.lang.foreign.MemorySegment;
import java.util.Set;

/** A store whose every operation fails as an unreachable server's would: STORE_UNREACHABLE naming host and port. */
final class UnreachableStoreTestDouble implements KVStore {
    @Override
    public String uri() {
        return "valkey://127.0.0.1:1";
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return Set.of();
    }

    private KVException down(String op, String key) {
        return KVException.of(ErrorCode.STORE_UNREACHABLE, "connection to 127.0.0.1:1 refused").store(uri())
                .operation(op).key(key).hint("is the store running?").build();
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        throw down("put", key);
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        throw down("get", key);
    }

    @Override
    public long size(String key) {
        throw down("size", key);
    }

    @Override
    public boolean remove(String key) {
        throw down("remove", key);
    }

    @Override
    public void close() {
    }
}
