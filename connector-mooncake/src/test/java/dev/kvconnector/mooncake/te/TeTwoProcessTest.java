package dev.kvconnector.mooncake.te;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Two engines in two JVMs: this one registers 4 MiB between two guard pages, a {@link TePeer} child moves bytes
 * into or out of it over the engine's transport (loopback TCP with the double), and every byte is checked here.
 */
class TeTwoProcessTest {
    private static final long BYTES = 4L << 20;
    private static final long GUARD = 4096;
    private static final byte GUARD_BYTE = 0x5A;
    private static final byte UNTOUCHED = 0x11;

    private TeTestTarget target;
    private TransferEngine engine;
    private Arena arena;
    private MemorySegment region;
    private MemorySegment registered;

    @BeforeEach
    void open() {
        target = TeTestTarget.require();
        engine = target.open();
        arena = Arena.ofShared();
        region = arena.allocate(GUARD + BYTES + GUARD, 4096);
        region.fill(GUARD_BYTE);
        registered = region.asSlice(GUARD, BYTES);
        registered.fill(UNTOUCHED);
        engine.register(registered, "cpu:0");
    }

    @AfterEach
    void close() {
        engine.close();
        arena.close();
    }

    private TeChildJvm child(String mode, long remote, long bytes, long seed) throws Exception {
        return TeChildJvm.start(mode, target.uri(), engine.segmentName(), Long.toString(remote), Long.toString(bytes),
                Long.toString(seed));
    }

    private void assertGuardsIntact() {
        assertEquals(-1, TePattern.firstNot(region.asSlice(0, GUARD), GUARD_BYTE), "guard before the buffer");
        assertEquals(-1, TePattern.firstNot(region.asSlice(GUARD + BYTES, GUARD), GUARD_BYTE), "guard after it");
    }

    @Test
    void writeOf4MiBFromAnotherProcessLandsInRegisteredMemoryEveryByteChecked() throws Exception {
        try (TeChildJvm peer = child("write", registered.address(), BYTES, 3)) {
            assertEquals("RESULT COMPLETED", peer.await("RESULT", 60), peer.output());
            peer.await("DONE", 30);
            assertEquals(0, peer.exitCode(30), peer.output());
        }
        assertEquals(-1, TePattern.firstMismatch(registered, 0, 3), "first wrong byte of the 4 MiB written");
        assertGuardsIntact();
    }

    @Test
    void readOf4MiBByAnotherProcessCopiesRegisteredMemoryEveryByteChecked() throws Exception {
        TePattern.fill(registered, 0, 9);
        try (TeChildJvm peer = child("read", registered.address(), BYTES, 9)) {
            assertEquals("RESULT COMPLETED mismatch=-1", peer.await("RESULT", 60), peer.output());
            assertEquals(0, peer.exitCode(30), peer.output());
        }
        assertEquals(-1, TePattern.firstMismatch(registered, 0, 9), "a READ must not change the source");
    }

    @Test
    void notificationsArriveInOrderAndAfterTheBytesSubmittedBeforeThem() throws Exception {
        long chunk = BYTES / 8;
        List<String> seen = new ArrayList<>();
        try (TeChildJvm peer = child("notify", registered.address(), BYTES, 5)) {
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (!seen.contains("end") && System.nanoTime() < deadline) {
                for (Notification n : engine.notifications()) {
                    assertEquals("req-7", n.name());
                    seen.add(n.message());
                    if (n.message().startsWith("chunk ")) {
                        int i = Integer.parseInt(n.message().substring(6));
                        assertEquals(-1, TePattern.firstMismatch(registered.asSlice(i * chunk, chunk), i * chunk, 5),
                                "chunk " + i + " must have landed before its notification");
                    }
                }
                Thread.sleep(1);
            }
            assertEquals(0, peer.exitCode(30), peer.output());
        }
        assertEquals(List.of("chunk 0", "chunk 1", "chunk 2", "chunk 3", "chunk 4", "chunk 5", "chunk 6", "chunk 7",
                "end"), seen);
        assertTrue(engine.notifications().isEmpty(), "notifications are handed out once");
    }

    @Test
    void writeCrossingTheEndOfThePeersRegistrationFailsNamingTheRangeAndCorruptsNothing() throws Exception {
        long remote = registered.address() + BYTES - 4096;
        try (TeChildJvm peer = child("write", remote, 8192, 4)) {
            String result = peer.await("RESULT", 60);
            assertTrue(result.startsWith("RESULT FAILED IO_ERROR"), result + "\n" + peer.output());
            assertTrue(result.contains("8192 bytes at 0x" + Long.toHexString(remote)), result);
            assertTrue(result.contains(engine.segmentName()), result);
            assertEquals(0, peer.exitCode(30), peer.output());
        }
        assertEquals(-1, TePattern.firstNot(registered, UNTOUCHED), "first byte changed by a refused WRITE");
        assertGuardsIntact();
    }

    @Test
    void twoBatchesAtOnceFromTwoThreadsFillTheirOwnHalvesEveryByteChecked() throws Exception {
        try (TeChildJvm peer = child("concurrent", registered.address(), BYTES, 8)) {
            assertEquals("RESULT COMPLETED COMPLETED", peer.await("RESULT", 60), peer.output());
            assertEquals(0, peer.exitCode(30), peer.output());
        }
        assertEquals(-1, TePattern.firstMismatch(registered, 0, 8), "first wrong byte of the two halves");
        assertGuardsIntact();
    }
}
