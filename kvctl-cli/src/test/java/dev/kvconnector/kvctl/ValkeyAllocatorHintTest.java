package dev.kvconnector.kvctl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.kvctl.FakeRespServer.Reply;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/** The MALLOC_CONF hint: printed for a jemalloc server that returns freed pages, and only then. */
class ValkeyAllocatorHintTest {
    private static final String JEMALLOC = "# Memory\r\nused_memory:1000\r\nmem_allocator:jemalloc-5.3.0\r\n";
    private static final String DECAYING = "___ Begin jemalloc statistics ___\n  opt.dirty_decay_ms: 10000 "
            + "(arenas.dirty_decay_ms: 10000)\n  opt.muzzy_decay_ms: 0 (arenas.muzzy_decay_ms: 0)\n";
    private static final String KEEPING = "  opt.dirty_decay_ms: -1 (arenas.dirty_decay_ms: -1)\n";

    @Test
    void aJemallocServerThatReturnsPagesGetsTheHint() {
        String h = ValkeyAllocatorHint.hint("h:1", JEMALLOC, DECAYING);
        assertTrue(h.startsWith("hint: h:1 runs jemalloc-5.3.0 with dirty_decay_ms 10000")
                && h.contains("MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1"), h);
        String unknown = ValkeyAllocatorHint.hint("h:1", JEMALLOC, null);
        assertTrue(unknown.contains("did not show") && unknown.contains("MALLOC_CONF"), unknown);
    }

    @Test
    void aServerThatKeepsItsPagesOrUsesAnotherAllocatorGetsNone() {
        assertNull(ValkeyAllocatorHint.hint("h:1", JEMALLOC, KEEPING));
        assertNull(ValkeyAllocatorHint.hint("h:1", "mem_allocator:libc\r\n", null));
        assertNull(ValkeyAllocatorHint.hint("h:1", null, null));
    }

    @Test
    void otherStoresAreNotProbed() {
        assertNull(ValkeyAllocatorHint.probe("memory:"));
        assertNull(ValkeyAllocatorHint.probe("valkeys://127.0.0.1:1"));
    }

    private static FakeRespServer server(String mallocStats) throws IOException {
        return new FakeRespServer(cmd -> switch (cmd.getFirst().toUpperCase(Locale.ROOT)) {
            case "INFO" -> Reply.of(FakeRespServer.bulk(JEMALLOC.getBytes(StandardCharsets.US_ASCII)));
            case "MEMORY" -> Reply.of(FakeRespServer.bulk(mallocStats.getBytes(StandardCharsets.US_ASCII)));
            default -> Reply.of(FakeRespServer.error("ERR unknown command"));
        });
    }

    @Test
    void probeAsksTheServerForInfoMemoryAndMallocStats() throws IOException {
        try (FakeRespServer decaying = server(DECAYING); FakeRespServer keeping = server(KEEPING)) {
            String h = ValkeyAllocatorHint.probe(decaying.uri(""));
            assertTrue(h != null && h.startsWith("hint: 127.0.0.1:" + decaying.port() + " runs jemalloc"), h);
            assertNull(ValkeyAllocatorHint.probe(keeping.uri("")));
        }
    }

    @Test
    void aServerThatCannotBeAskedIsNamedInANote() throws IOException {
        int port;
        try (FakeRespServer gone = server(DECAYING)) {
            port = gone.port();
        }
        String note = ValkeyAllocatorHint.probe("valkey://127.0.0.1:" + port);
        assertTrue(note.startsWith("note: could not read the allocator settings of 127.0.0.1:" + port), note);
        assertEquals(1, note.lines().count());
    }
}
