package dev.kvconnector.mooncake.te;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** One engine in this JVM: opening, registration, segments and batches, and every error a caller can meet. */
class TeEngineTest {
    private final TeTestTarget target = TeTestTarget.require();

    @Test
    void segmentNameIsTheHostAndTheListeningPort() {
        try (TransferEngine engine = target.open()) {
            assertTrue(engine.segmentName().matches(Pattern.quote(target.host()) + ":\\d+"),
                    engine.segmentName());
        }
    }

    @Test
    void unreachablePeerFailsFastNamingHostAndPort() throws IOException {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        try (TransferEngine engine = target.open()) {
            long start = System.nanoTime();
            KVException e = assertThrows(KVException.class, () -> engine.openSegment("127.0.0.1:" + port));
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
            assertTrue(e.getMessage().contains("127.0.0.1:" + port), e.getMessage());
            assertTrue(ms < 5000, "openSegment took " + ms + " ms");
        }
    }

    @Test
    void peerThatNeverAcceptsFailsAfterTheConnectTimeoutNamingHostAndPort() throws IOException {
        assumeTrue(target.isDouble(), "the double's connect timeout is 1 s; the real engine's is its own");
        // A listener that never accepts, its accept queue filled: the kernel then drops further SYNs.
        try (ServerSocket silent = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             TransferEngine engine = target.open()) {
            List<Socket> fillers = new ArrayList<>();
            try {
                for (int i = 0; i < 4; i++) {
                    Socket s = new Socket();
                    fillers.add(s);
                    try {
                        s.connect(silent.getLocalSocketAddress(), 200);
                    } catch (IOException queueFull) {
                        break;
                    }
                }
                String name = "127.0.0.1:" + silent.getLocalPort();
                long start = System.nanoTime();
                KVException e = assertThrows(KVException.class, () -> engine.openSegment(name));
                long ms = (System.nanoTime() - start) / 1_000_000;
                assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
                assertTrue(e.getMessage().contains(name), e.getMessage());
                assertTrue(ms >= 500 && ms < 5000, "openSegment gave up after " + ms + " ms");
            } finally {
                for (Socket s : fillers) {
                    s.close();
                }
            }
        }
    }

    @Test
    void missingLibraryNamesThePathAndHowToBuildIt() {
        Path missing = Path.of("/nonexistent/libtransfer_engine.so");
        KVException e = assertThrows(KVException.class, () -> TransferEngine.open(
                "mooncake-te://127.0.0.1?library=" + missing));
        assertEquals(ErrorCode.NATIVE_LIBRARY_MISSING, e.code());
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("--whole-archive"), e.getMessage());
    }

    @Test
    void noLibraryAnywhereListsEveryPlaceSearched() {
        KVException e = assertThrows(KVException.class, () -> TransferEngineLocator.locate(null, Map.of(),
                "/nonexistent-dir", "mooncake-te://127.0.0.1"));
        assertEquals(ErrorCode.NATIVE_LIBRARY_MISSING, e.code());
        assertTrue(e.getMessage().contains("MOONCAKE_TE_LIB (not set)"), e.getMessage());
        assertTrue(e.getMessage().contains("/nonexistent-dir/libtransfer_engine.so"), e.getMessage());
    }

    @Test
    void libraryWithoutTheSymbolsNamesTheFirstMissingOneWithAnNmHint() {
        String storeDouble = System.getProperty("kvc.mooncake.double");
        assumeTrue(storeDouble != null && Path.of(storeDouble).toFile().isFile(), "the store double is not built");
        KVException e = assertThrows(KVException.class, () -> TransferEngine.open(
                "mooncake-te://127.0.0.1?library=" + storeDouble));
        assertEquals(ErrorCode.NATIVE_LIBRARY_MISSING, e.code());
        assertTrue(e.getMessage().contains("does not export createTransferEngine"), e.getMessage());
        assertTrue(e.getMessage().contains("nm -D"), e.getMessage());
    }

    @Test
    void unknownUriOptionIsRefusedByName() {
        KVException e = assertThrows(KVException.class, () -> TransferEngine.open(
                "mooncake-te://127.0.0.1?library=" + target.library() + "&protcol=tcp"));
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertTrue(e.getMessage().contains("protcol"), e.getMessage());
    }

    @Test
    void unsupportedProtocolIsAConfigurationError() {
        assumeTrue(target.isDouble(), "the double has only tcp");
        KVException e = assertThrows(KVException.class, () -> TransferEngine.open(
                "mooncake-te://127.0.0.1?protocol=rdma&library=" + target.library()));
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("installTransport(rdma)"), e.getMessage());
    }

    @Test
    void overlappingRegistrationNamesAddressAndLength() {
        try (TransferEngine engine = target.open(); Arena arena = Arena.ofConfined()) {
            MemorySegment buffer = arena.allocate(1 << 16, 4096);
            engine.register(buffer, "cpu:0");
            MemorySegment inner = buffer.asSlice(4096, 4096);
            KVException e = assertThrows(KVException.class, () -> engine.register(inner, "cpu:0"));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("4096 bytes at 0x" + Long.toHexString(inner.address())),
                    e.getMessage());
            assertTrue(e.getMessage().contains("overlaps"), e.getMessage());
            engine.unregister(buffer);
        }
    }

    @Test
    void heapMemoryIsRefusedBeforeItReachesNativeCode() {
        try (TransferEngine engine = target.open()) {
            KVException e = assertThrows(KVException.class,
                    () -> engine.register(MemorySegment.ofArray(new byte[64]), "cpu:0"));
            assertEquals(ErrorCode.UNSUPPORTED_MEMORY, e.code());
        }
    }

    @Test
    void cudaLocationReachesTheEngineUnchanged() throws Throwable {
        assumeTrue(target.isDouble(), "only the double reports a registration's location");
        try (TransferEngine engine = target.open(); Arena arena = Arena.ofConfined()) {
            // With the CUDA driver double "device" memory is host memory; the location is what is checked.
            MemorySegment device = arena.allocate(1 << 20, 4096);
            engine.register(device, "cuda:1");
            assertEquals("cuda:1", registrationLocation(arena, engine, device.address() + 100));
            engine.unregister(device);
        }
    }

    @Test
    void batchRegistrationRegistersEveryBufferAndUndoesAllOnFailure() throws Throwable {
        assumeTrue(target.isDouble(), "only the double reports a registration's location");
        try (TransferEngine engine = target.open(); Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(8192, 4096);
            MemorySegment b = arena.allocate(8192, 4096);
            engine.registerAll(List.of(a, b), "cpu:0");
            assertEquals("cpu:0", registrationLocation(arena, engine, b.address()));
            MemorySegment c = arena.allocate(8192, 4096);
            assertThrows(KVException.class, () -> engine.registerAll(List.of(c, a), "cpu:0"));
            assertEquals(null, registrationLocation(arena, engine, c.address()), "c must be unregistered again");
        }
    }

    @Test
    void batchOverCapacityReturnsBatchFullAndSubmitToAClosedSegmentIsRefused() {
        try (TransferEngine engine = target.open(); TransferEngine peerEngine = target.open();
             Arena arena = Arena.ofConfined()) {
            MemorySegment buffer = arena.allocate(4096, 4096);
            engine.register(buffer, "cpu:0");
            RemoteSegment peer = engine.openSegment(peerEngine.segmentName());
            try (TransferBatch batch = engine.newBatch(1)) {
                assertEquals(TransferBatch.NOTHING_SUBMITTED, batch.poll());
                assertEquals(0, batch.write(buffer, peer, 0x1000, 4096));
                assertEquals(TransferBatch.BATCH_FULL, batch.write(buffer, peer, 0x1000, 4096));
                assertThrows(IndexOutOfBoundsException.class, () -> batch.write(buffer, peer, 0, 4097));
                assertThrows(IndexOutOfBoundsException.class, () -> batch.write(buffer, 1, peer, 0, 4096),
                        "a part of a buffer must lie inside it");
            }
            engine.closeSegment(peer);
            try (TransferBatch batch = engine.newBatch(1)) {
                batch.write(buffer, peer, 0x1000, 4096);
                int rc = batch.submit();
                assertEquals(TransferEngineErrors.INVALID_ARGUMENT, rc);
                KVException failure = batch.submitFailure(rc);
                assertEquals(ErrorCode.INVALID_ARGUMENT, failure.code());
                assertTrue(failure.getMessage().contains("rejected (code 1)"), failure.getMessage());
                assertEquals(TransferBatch.NOTHING_SUBMITTED, batch.poll(), "a refused submit submits nothing");
            }
        }
    }

    @Test
    void closedEngineRefusesCallsWithClosed() {
        TransferEngine engine = target.open();
        engine.close();
        engine.close();
        KVException e = assertThrows(KVException.class, () -> engine.openSegment("127.0.0.1:1"));
        assertEquals(ErrorCode.CLOSED, e.code());
    }

    @SuppressWarnings("restricted")
    private static String registrationLocation(Arena arena, TransferEngine engine, long address) throws Throwable {
        SymbolLookup lookup = SymbolLookup.libraryLookup(Path.of(engine.library().location().path().toString()),
                arena);
        MethodHandle h = Linker.nativeLinker().downcallHandle(
                lookup.find("kvc_te_double_registration_location").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS,
                        ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        MemorySegment buf = arena.allocate(64);
        int rc = (int) h.invokeExact(engine.handle(), MemorySegment.ofAddress(address), buf, 64L);
        return rc == 0 ? buf.getString(0, StandardCharsets.UTF_8) : null;
    }
}
