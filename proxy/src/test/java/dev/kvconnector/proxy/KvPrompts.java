package dev.kvconnector.proxy;

import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Prompts as the demo engine sees them, written out here rather than taken from the proxy's router, so that a test
 * of the router checks it against an independent reading: one token per UTF-8 byte, and kvc-v1 chunk hashes chained
 * from a root.
 */
final class KvPrompts {
    private KvPrompts() {
    }

    /** The token ids of {@code text}: its UTF-8 bytes, unsigned. */
    static int[] byteTokens(String text) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        int[] ids = new int[b.length];
        for (int i = 0; i < b.length; i++) {
            ids[i] = b[i] & 0xff;
        }
        return ids;
    }

    /** The kvc-v1 hashes of {@code prompt}'s full chunks of {@code chunkTokens}, chained from {@code root}. */
    static List<String> chunkHashes(byte[] root, int chunkTokens, String prompt) {
        return KvcV1KeyScheme.planFromRoot(root, chunkTokens, 0, RequestTokens.of(byteTokens(prompt))).chunks()
                .stream().map(c -> c.hashHex()).toList();
    }
}
