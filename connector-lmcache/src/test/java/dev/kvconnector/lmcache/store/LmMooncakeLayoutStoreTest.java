package dev.kvconnector.lmcache.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.format.LmRemoteMetadata;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.testkit.LeakCheck;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The LMCache mooncakestore layout against the native Mooncake store test double. */
@ExtendWith(LeakCheck.class)
class LmMooncakeLayoutStoreTest {
    @Test
    void theObjectIsMetadataThenKvUnderTheKeyString() {
        String master = MooncakeDouble.freshMaster();
        try (Arena arena = Arena.ofConfined();
             KVStore lm = KVStores.open(MooncakeDouble.uri("lmcache+mooncake", master));
             KVStore plain = KVStores.open(MooncakeDouble.uri("mooncake", master))) {
            assertFalse(lm.capabilities().contains(StoreCapability.REGISTERED_MEMORY));
            MemorySegment obj = Segments.random(arena, 28 + 5000, 1);
            LmRemoteMetadata.of(5000, 1, 3, 2, 1, 1250, 1).encode(obj, 0);
            String key = "m@1@0@abc@bfloat16";
            assertTrue(lm.put(key, obj, PutOptions.DEFAULT));
            MemorySegment raw = arena.allocate(obj.byteSize());
            assertEquals(obj.byteSize(), plain.getInto(key, raw), "one object, under the key string itself");
            assertEquals(-1, raw.mismatch(obj));
            MemorySegment back = arena.allocate(obj.byteSize());
            assertEquals(obj.byteSize(), lm.getInto(key, back));
            assertEquals(-1, back.mismatch(obj));

            KVException notChunk = assertThrows(KVException.class,
                    () -> lm.put("other", obj.asSlice(0, 1000), PutOptions.DEFAULT));
            assertEquals(ErrorCode.INVALID_ARGUMENT, notChunk.code());
            assertFalse(plain.exists("other"));

            plain.put("foreign", obj.asSlice(0, 1028), PutOptions.DEFAULT);
            KVException corrupt = assertThrows(KVException.class, () -> lm.getInto("foreign", back));
            assertEquals(ErrorCode.CORRUPT_OBJECT, corrupt.code());
            assertTrue(corrupt.getMessage().contains("length=5000 but 1000"), corrupt.getMessage());
        }
    }

    @Test
    void aConsumingReaderRemovesWhatItReadPastItsOwnLease() {
        String master = MooncakeDouble.freshMaster();
        try (Arena arena = Arena.ofConfined();
             KVStore lm = KVStores.open(MooncakeDouble.uri("lmcache+mooncake", master) + "&lease-wait=20ms")) {
            MemorySegment obj = Segments.random(arena, 28 + 100, 2);
            LmRemoteMetadata.of(100, 1, 1, 2, 1, 25, 1).encode(obj, 0);
            String key = "m@1@0@def@bfloat16";
            assertTrue(lm.put(key, obj, PutOptions.DEFAULT));
            assertEquals(obj.byteSize(), lm.getInto(key, arena.allocate(obj.byteSize())));
            KVException leased = assertThrows(KVException.class, () -> lm.remove(key));
            assertEquals(ErrorCode.BUSY, leased.code(), "the read took a lease that a plain remove waits for");
            assertEquals(1, lm.removeConsumed(new String[] {key}, 1));
            assertFalse(lm.exists(key));
        }
    }
}
