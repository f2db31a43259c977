package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.cuda.CudaContext;
import dev.kvconnector.cuda.CudaDriver;
import dev.kvconnector.cuda.CudaRuntime;
import dev.kvconnector.cuda.DeviceLayers;
import dev.kvconnector.cuda.DevicePagedKVCache;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The connector's device path against its host path, for any store: a request's KV in a paged cache in GPU memory
 * ({@link DevicePagedKVCache}) is inserted and drop-selected, and the objects stored and the caches filled must be
 * byte-identical to what the host path ({@link PagedKVCache}) stores and fills from the same bytes. For a
 * {@link StoreCapability#DEVICE_MEMORY} store (GPUDirect, no payload CRC) the host path runs without checksums, so
 * its objects are comparable.
 *
 * <p>Runs where {@link CudaRuntime#probe()} finds a usable device: a GPU, or the CUDA driver test double
 * ({@code -Dkvc.cuda.library=.../libcuda_driver_double.so}), which keeps device memory in host memory and emulates
 * the gather and scatter kernels. Skips elsewhere with the probe's reason, unless {@code -Dkvc.cuda.require=true}.
 */
public abstract class DeviceConnectorContract {
    private static final KVLayout MHA = new KVLayout("tiny-mha", AttentionKind.MHA, 3, 2, 64, DType.BF16, 16, 32);
    private static final KVLayout MLA = new KVLayout("tiny-mla", AttentionKind.MLA, 2, 1, 576, DType.BF16, 16, 0);
    private static final int NUM_BLOCKS = 24;
    private static final int CHUNK_TOKENS = 64;
    /** Three chunks: 64, 64 and a partial 22. */
    private static final int TOKENS = 150;
    private static final AtomicInteger REQUESTS = new AtomicInteger();
    private static final AtomicReference<MethodHandle> DOUBLE_COUNTER = new AtomicReference<>();

    private CudaContext context;
    private CudaDriver driver;
    private MemorySegment stream;
    private final List<Long> allocations = new ArrayList<>();
    private final List<KVStore> stores = new ArrayList<>();

    /** A fresh, empty store for one connector of a test; the contract closes it. */
    protected abstract KVStore openStore();

    /**
     * Checks a store right after a device insert into it committed, while its connector is still open; a layer's
     * payload is {@code layerPayloadBytes}. For store-specific checks, such as device buffers being registered.
     */
    protected void afterDeviceInsert(KVStore store, long layerPayloadBytes) {
    }

    @BeforeEach
    void openDevice() {
        if (!Boolean.getBoolean("kvc.cuda.require")) {
            CudaRuntime.Probe probe = CudaRuntime.probe();
            Assumptions.assumeTrue(probe.usable(), () -> "no CUDA device: " + probe.problem());
        }
        context = CudaContext.primary(0);
        driver = context.driver();
        stream = driver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
    }

    @AfterEach
    void closeDevice() {
        try {
            for (KVStore s : stores) {
                s.close();
            }
            if (driver != null) {
                context.makeCurrent();
                driver.streamSynchronize(stream);
                for (long p : allocations) {
                    driver.memFree(p);
                }
                driver.streamDestroy(stream);
            }
        } finally {
            if (context != null) {
                context.close();
            }
        }
    }

    @ParameterizedTest(name = "{0}, {1}, ioThreads={2}")
    @CsvSource({"mha, layer by layer, 0", "mha, all layers, 0", "mha, all layers, 2", "mla, layer by layer, 2",
        "mla, all layers, 0"})
    void insertFromTheDeviceStoresTheObjectsTheHostInsertStores(String kind, String mode, int ioThreads) {
        KVLayout layout = kind.equals("mha") ? MHA : MLA;
        RequestTokens request = request();
        TokenSlots slots = blockTable(layout, 1);
        KVStore hostStore = store();
        KVStore deviceStore = store();
        try (Arena arena = Arena.ofConfined(); PagedKVCache host = filled(layout, 7);
             KVStoreConnector hostPath = connector(hostStore, layout, deviceStore, ioThreads);
             KVStoreConnector devicePath = connector(deviceStore, layout, deviceStore, ioThreads)) {
            DevicePagedKVCache device = upload(host);
            try (InsertSession insert = hostPath.beginInsert(request)) {
                for (int l = 0; l < layout.numLayers(); l++) {
                    insert.putLayer(l, host, slots);
                }
                insert.commit();
            }
            try (InsertSession insert = devicePath.beginInsert(request)) {
                if (mode.equals("all layers")) {
                    insert.putLayers(DeviceLayers.of(device, slots));
                } else {
                    for (int l = 0; l < layout.numLayers(); l++) {
                        insert.putLayer(l, DeviceLayers.of(device, slots));
                    }
                }
                insert.commit();
            }
            afterDeviceInsert(deviceStore, layout.layerBytes(TOKENS));
            int objects = 0;
            for (ChunkKeys c : KeySchemes.byName(KeySchemes.DEFAULT).plan(devicePath.keyContext(), request).chunks()) {
                objects += assertSameObject(arena, hostStore, deviceStore, c.manifestKey());
                for (String key : c.layerKeys()) {
                    objects += assertSameObject(arena, hostStore, deviceStore, key);
                }
            }
            assertEquals(3 * (1 + layout.numLayers()), objects, "manifests and layer objects compared");
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"mha", "mla"})
    void dropSelectIntoTheDeviceFillsWhatTheHostDropSelectFills(String kind) {
        KVLayout layout = kind.equals("mha") ? MHA : MLA;
        RequestTokens request = request();
        KVStore store = store();
        try (Arena arena = Arena.ofConfined(); PagedKVCache source = filled(layout, 11);
             PagedKVCache hostTarget = PagedKVCache.allocate(layout, NUM_BLOCKS);
             PagedKVCache zeros = PagedKVCache.allocate(layout, NUM_BLOCKS);
             KVStoreConnector connector = connector(store, layout, store, 0)) {
            try (InsertSession insert = connector.beginInsert(request)) {
                for (int l = 0; l < layout.numLayers(); l++) {
                    insert.putLayer(l, source, blockTable(layout, 2));
                }
                insert.commit();
            }
            TokenSlots decodeSlots = blockTable(layout, 3);
            assertTrue(connector.dropSelect(request, DropTarget.paged(hostTarget, decodeSlots), DropMode.RETAIN)
                    .isComplete());
            DevicePagedKVCache deviceTarget = upload(zeros);
            DropResult r = connector.dropSelect(request, DropTarget.of(DeviceLayers.of(deviceTarget, decodeSlots)));
            assertEquals(DropResult.hit(TOKENS, TOKENS), r);
            assertSameCache(arena, hostTarget, deviceTarget);
        }
    }

    @Test
    void aLayerWiseDeviceDropFollowsALayerWiseDeviceInsert() throws Exception {
        RequestTokens request = request();
        KVStore store = store();
        try (Arena arena = Arena.ofConfined(); PagedKVCache source = filled(MHA, 13);
             PagedKVCache expected = PagedKVCache.allocate(MHA, NUM_BLOCKS);
             PagedKVCache zeros = PagedKVCache.allocate(MHA, NUM_BLOCKS);
             KVStoreConnector producer = connector(store, MHA, store, 2);
             KVStoreConnector consumer = connector(store, MHA, store, 2)) {
            TokenSlots prefillSlots = blockTable(MHA, 4);
            TokenSlots decodeSlots = blockTable(MHA, 5);
            MemorySegment flat = arena.allocate(TOKENS * MHA.bytesPerTokenPerTensor(), 64);
            for (int l = 0; l < MHA.numLayers(); l++) {
                for (int t = 0; t < 2; t++) {
                    source.gather(l, t, prefillSlots, 0, TOKENS, flat, 0);
                    expected.scatter(flat, 0, l, t, decodeSlots, 0, TOKENS);
                }
            }
            DevicePagedKVCache deviceSource = upload(source);
            DevicePagedKVCache deviceTarget = upload(zeros);
            try (DropSession drop = consumer.beginDropSelect(request, DropTarget.of(DeviceLayers.of(deviceTarget, decodeSlots)));
                 InsertSession insert = producer.beginInsert(request)) {
                for (int l = 0; l < MHA.numLayers(); l++) {
                    insert.putLayer(l, DeviceLayers.of(deviceSource, prefillSlots));
                }
                insert.commit();
                for (int l = 0; l < MHA.numLayers(); l++) {
                    assertTrue(drop.awaitLayer(l), () -> "layer loaded: " + drop.result());
                }
                assertEquals(DropResult.hit(TOKENS, TOKENS), drop.result());
            }
            context.makeCurrent();
            assertSameCache(arena, expected, deviceTarget);
        }
    }

    /**
     * A {@code DEVICE_MEMORY} store gets the device buffers themselves: no layer payload crosses to the host, only
     * the 64-byte headers (and the slot mapping going up). Any other store gets every layer copied device-to-host on
     * insert and host-to-device on drop-select. Counted by the CUDA driver test double, so this runs against it only.
     */
    @Test
    void onlyAStoreWithoutDeviceMemoryGetsTheLayersThroughTheHost() {
        Assumptions.assumeTrue(doubleCounter() != null, "counts copies with the CUDA driver test double's counter; "
                + CudaDriver.LIBRARY_PROP + " does not name the double here");
        RequestTokens request = request();
        KVStore store = store();
        boolean direct = store.capabilities().contains(StoreCapability.DEVICE_MEMORY);
        long payload = MHA.numLayers() * MHA.layerBytes(TOKENS);
        long headers = MHA.numLayers() * 3L * 64;
        try (PagedKVCache source = filled(MHA, 23); PagedKVCache zeros = PagedKVCache.allocate(MHA, NUM_BLOCKS);
             KVStoreConnector connector = connector(store, MHA, store, 2)) {
            DevicePagedKVCache device = upload(source);
            DevicePagedKVCache target = upload(zeros);
            long[] before = {copied(0), copied(1)};
            try (InsertSession insert = connector.beginInsert(request)) {
                insert.putLayers(DeviceLayers.of(device, blockTable(MHA, 8)));
                insert.commit();
            }
            long[] insert = {copied(0) - before[0], copied(1) - before[1]};
            before = new long[] {copied(0), copied(1)};
            assertTrue(connector.dropSelect(request, DropTarget.of(DeviceLayers.of(target, blockTable(MHA, 9)))).isComplete());
            long[] drop = {copied(0) - before[0], copied(1) - before[1]};
            long slotMapping = TOKENS * 8L;
            if (direct) {
                assertEquals(0, insert[1], "insert copied nothing device-to-host");
                assertEquals(slotMapping + headers, insert[0], "insert copied the slot mapping and headers up");
                assertEquals(slotMapping, drop[0], "drop-select copied only the slot mapping up");
                assertEquals(headers, drop[1], "drop-select copied only the headers down, to check them");
            } else {
                assertTrue(insert[1] >= payload, "insert staged " + insert[1] + " bytes for a payload of " + payload);
                assertTrue(drop[0] >= payload + slotMapping, "drop-select staged " + drop[0] + " bytes");
            }
        }
    }

    @Test
    void aSlotOutsideTheDeviceCacheIsRefusedBeforeAnythingIsStored() {
        KVStore store = store();
        int[] blocks = IntStream.range(0, (TOKENS + MHA.blockSize() - 1) / MHA.blockSize()).toArray();
        blocks[2] = NUM_BLOCKS + 3;
        try (PagedKVCache source = filled(MHA, 17); KVStoreConnector connector = connector(store, MHA, store, 0)) {
            DevicePagedKVCache device = upload(source);
            RequestTokens request = request();
            try (InsertSession insert = connector.beginInsert(request)) {
                KVException e = assertThrows(KVException.class,
                        () -> insert.putLayer(0, DeviceLayers.of(device, new BlockTable(blocks, MHA.blockSize(), TOKENS))));
                assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
                assertTrue(e.getMessage().contains("token 32 maps to slot " + (NUM_BLOCKS + 3) * 16L)
                        && e.getMessage().contains("outside the device cache's " + NUM_BLOCKS * 16L + " slots"),
                        e.getMessage());
            }
            assertEquals(0, connector.lookup(request));
        }
    }

    @Test
    void aCacheOnASecondDeviceIsRefusedNamingBothDevices() {
        KVStore store = store();
        try (PagedKVCache source = filled(MHA, 19); KVStoreConnector connector = connector(store, MHA, store, 0)) {
            DevicePagedKVCache device = upload(source);
            RequestTokens request = request();
            try (InsertSession insert = connector.beginInsert(request)) {
                insert.putLayer(0, DeviceLayers.of(device, blockTable(MHA, 6)));
                long[][] same = new long[MHA.numLayers()][];
                for (int l = 0; l < same.length; l++) {
                    same[l] = new long[] {device.address(l, 0), device.address(l, 1)};
                }
                DevicePagedKVCache other = DevicePagedKVCache.wrap(MHA, NUM_BLOCKS, 1, same);
                KVException e = assertThrows(KVException.class,
                        () -> insert.putLayer(1, DeviceLayers.of(other, blockTable(MHA, 6))));
                assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
                assertTrue(e.getMessage().contains("cuda:1") && e.getMessage().contains("cuda:0"), e.getMessage());
            }
        }
    }

    private static MethodHandle doubleCounter() {
        String library = System.getProperty(CudaDriver.LIBRARY_PROP);
        if (library == null || !library.contains("cuda_driver_double")) {
            return null;
        }
        return DOUBLE_COUNTER.updateAndGet(h -> h != null ? h : bindCounter(library));
    }

    @SuppressWarnings("restricted")
    private static MethodHandle bindCounter(String library) {
        MemorySegment symbol = SymbolLookup.libraryLookup(Path.of(library), Arena.global())
                .find("kvc_cuda_double_copied_bytes").orElseThrow();
        return Linker.nativeLinker().downcallHandle(symbol,
                FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
    }

    /** Bytes the double has copied host-to-device (0) or device-to-host (1) so far. */
    private static long copied(int direction) {
        try {
            return (long) doubleCounter().invokeExact(direction);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    private KVStore store() {
        KVStore s = openStore();
        stores.add(s);
        return s;
    }

    /** A connector; without checksums when {@code deviceStore} takes device memory, so both paths compare. */
    private static KVStoreConnector connector(KVStore store, KVLayout layout, KVStore deviceStore, int ioThreads) {
        return KVStoreConnector.builder(store, layout).chunkTokens(CHUNK_TOKENS).ioThreads(ioThreads)
                .stagingBytes(64L << 20)
                .checksums(!deviceStore.capabilities().contains(StoreCapability.DEVICE_MEMORY)).build();
    }

    private static RequestTokens request() {
        int base = REQUESTS.incrementAndGet() * 1000;
        return RequestTokens.of(IntStream.range(base, base + TOKENS).toArray());
    }

    /** A block table over shuffled blocks of the cache. */
    private static BlockTable blockTable(KVLayout layout, long seed) {
        List<Integer> all = new ArrayList<>();
        for (int i = 0; i < NUM_BLOCKS; i++) {
            all.add(i);
        }
        Collections.shuffle(all, new Random(seed));
        int blocks = (TOKENS + layout.blockSize() - 1) / layout.blockSize();
        return new BlockTable(all.subList(0, blocks).stream().mapToInt(Integer::intValue).toArray(),
                layout.blockSize(), TOKENS);
    }

    private static PagedKVCache filled(KVLayout layout, long seed) {
        PagedKVCache cache = PagedKVCache.allocate(layout, NUM_BLOCKS);
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                Segments.fill(cache.tensor(l, t), seed * 100 + l * 10L + t);
            }
        }
        return cache;
    }

    /** A device copy of every tensor of {@code host}, freed after the test. */
    private DevicePagedKVCache upload(PagedKVCache host) {
        KVLayout layout = host.layout();
        long[][] addresses = new long[layout.numLayers()][layout.tensorsPerLayer()];
        for (int l = 0; l < addresses.length; l++) {
            for (int t = 0; t < addresses[l].length; t++) {
                MemorySegment src = host.tensor(l, t);
                long p = driver.memAlloc(src.byteSize());
                allocations.add(p);
                driver.memcpyHtoDAsync(p, src, stream);
                addresses[l][t] = p;
            }
        }
        driver.streamSynchronize(stream);
        return DevicePagedKVCache.wrap(layout, host.numBlocks(), 0, addresses);
    }

    private void assertSameCache(Arena arena, PagedKVCache expected, DevicePagedKVCache device) {
        KVLayout layout = expected.layout();
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                MemorySegment want = expected.tensor(l, t);
                MemorySegment got = arena.allocate(want.byteSize(), 64);
                driver.memcpyDtoHAsync(got, device.address(l, t), stream);
                driver.streamSynchronize(stream);
                assertEquals(-1L, want.mismatch(got), "layer " + l + " tensor " + t);
            }
        }
    }

    /** Asserts both stores hold {@code key} with the same bytes; returns 1. */
    private static int assertSameObject(Arena arena, KVStore a, KVStore b, String key) {
        long size = a.size(key);
        assertTrue(size > 0, () -> "host path stored " + key);
        assertEquals(size, b.size(key), () -> "device path stored " + key + " with the same size");
        MemorySegment x = arena.allocate(size, 64);
        MemorySegment y = arena.allocate(size, 64);
        assertEquals(size, a.getInto(key, x));
        long r = b.getInto(key, y);
        assertTrue(!GetResult.isMiss(r), key);
        assertEquals(-1L, x.mismatch(y), () -> "object " + key + " differs between host and device paths");
        return 1;
    }
}
