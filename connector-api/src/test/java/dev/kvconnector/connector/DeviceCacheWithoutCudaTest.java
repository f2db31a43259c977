package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.cuda.CudaDriver;
import dev.kvconnector.cuda.CudaRuntime;
import dev.kvconnector.cuda.DeviceLayers;
import dev.kvconnector.cuda.DevicePagedKVCache;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.memory.MemoryStore;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * Device caches on a machine without the CUDA driver: a clear error naming what is missing and where it was looked
 * for, nothing stored, no fallback to the host, and the host path unaffected. Runs in the surefire execution
 * {@code cuda-absent}, whose {@code kvc.cuda.library} names a library that does not exist, so it runs the same on
 * machines with and without a GPU.
 */
class DeviceCacheWithoutCudaTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");

    @Test
    void deviceCachesNameTheMissingDriverWhileHostCachesStillMove() {
        String configured = System.getProperty(CudaDriver.LIBRARY_PROP);
        assertTrue(configured != null && configured.contains("no-cuda-driver"), "runs in the cuda-absent execution");
        assertFalse(CudaRuntime.probe().driverLoaded());
        long[][] addresses = new long[LAYOUT.numLayers()][];
        for (int l = 0; l < addresses.length; l++) {
            addresses[l] = new long[] {0x7000_0000_0000L + l * 0x10_0000L, 0x7100_0000_0000L + l * 0x10_0000L};
        }
        DevicePagedKVCache device = DevicePagedKVCache.wrap(LAYOUT, 8, 0, addresses);
        BlockTable slots = new BlockTable(new int[] {3, 1, 4}, LAYOUT.blockSize(), 40);
        RequestTokens request = RequestTokens.of(IntStream.range(0, 40).toArray());
        try (MemoryStore store = MemoryStore.withCapacity(64L << 20);
             KVStoreConnector connector = KVStoreConnector.builder(store, LAYOUT).build();
             PagedKVCache host = PagedKVCache.allocate(LAYOUT, 8)) {
            try (InsertSession insert = connector.beginInsert(request)) {
                KVException e = assertThrows(KVException.class, () -> insert.putLayer(0, DeviceLayers.of(device, slots)));
                assertEquals(ErrorCode.UNSUPPORTED_MEMORY, e.code());
                assertTrue(e.getMessage().contains("device tensors on cuda:0 cannot be moved")
                        && e.getMessage().contains("no CUDA driver library (libcuda) found")
                        && e.getMessage().contains(configured), e.getMessage());
                assertTrue(e.hint().contains("install the NVIDIA driver"), e.hint());
            }
            assertEquals(0, store.count(), "nothing stored for the failed insert");
            KVException drop = assertThrows(KVException.class,
                    () -> connector.dropSelect(request, DropTarget.of(DeviceLayers.of(device, slots))));
            assertEquals(ErrorCode.UNSUPPORTED_MEMORY, drop.code());
            try (InsertSession insert = connector.beginInsert(request)) {
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    insert.putLayer(l, host, slots);
                }
                insert.commit();
            }
            assertEquals(40, connector.lookup(request));
        }
    }
}
