package dev.kvconnector.mooncake.p2p;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

class P2pMessageTest {
    @Test
    void everyKindCarriesItsGenerationAndGenerationZeroKeepsTheFirstFormat() {
        assertEquals("kvc-p2p/1 L p:1 3 4096 4294967295", P2pTestMessages.layer("p:1", 3, 4096, -1));
        String layer = P2pMessage.layer(new StringBuilder(), 2, "p:1", 3, 4096, -1).toString();
        assertEquals("kvc-p2p/1 L@2 p:1 3 4096 4294967295", layer);

        P2pMessage m = P2pMessage.parse(layer);
        assertEquals(P2pMessage.Kind.LAYER, m.kind());
        assertEquals(2, m.generation());
        assertEquals(3, m.a());
        assertEquals(4096, m.b());
        assertEquals(-1, m.sum());
        assertEquals(0, P2pMessage.parse(P2pTestMessages.layer("p:1", 3, 4096, 7)).generation());

        P2pMessage h = P2pMessage.parse(P2pMessage.hidden(7, "p:1", 64, 9));
        assertEquals(P2pMessage.Kind.HIDDEN, h.kind());
        assertEquals(7, h.generation());
        assertEquals(9, h.sum());
        P2pMessage c = P2pMessage.parse(P2pMessage.commit(1, "p:1", 32));
        assertEquals(P2pMessage.Kind.COMMIT, c.kind());
        assertEquals(1, c.generation());
        assertEquals(32, c.a());
        P2pMessage a = P2pMessage.parse(P2pMessage.abort(4, "p:1", "out of memory: 2 blocks"));
        assertEquals(P2pMessage.Kind.ABORT, a.kind());
        assertEquals(4, a.generation());
        assertEquals("out of memory: 2 blocks", a.text());
        assertEquals(0, P2pMessage.parse(P2pMessage.cancel("d:2", "done")).generation());
    }

    @Test
    void aMalformedGenerationIsNoMessage() {
        for (String bad : new String[] {"kvc-p2p/1 L@ p 1 2 3", "kvc-p2p/1 L@x p 1 2 3", "kvc-p2p/1 L@-1 p 1 2 3",
                "kvc-p2p/1 LL p 1 2 3", "kvc-p2p/1 L@99999999999 p 1 2 3", "kvc-p2p/1 A@ p why"}) {
            assertNull(P2pMessage.parse(bad), bad);
        }
    }
}
