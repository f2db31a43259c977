package dev.kvconnector.mooncake.p2p;

/** Messages as a producer of generation 0 sends them, for tests that play one by hand. */
final class P2pTestMessages {
    private P2pTestMessages() {
    }

    /** The layer message of generation 0 ({@link P2pMessage#layer(StringBuilder, int, String, int, long, int)}). */
    static String layer(String sender, int layer, long bytes, int sum) {
        return P2pMessage.layer(new StringBuilder(), 0, sender, layer, bytes, sum).toString();
    }
}
