package dev.kvconnector.demo.launcher;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The demo's prompts: deterministic (seeded) English-like text of varied lengths in bytes, a third of them
 * opening with one of a few shared preambles, as chat system prompts do.
 */
final class Workload {
    private static final String[] WORDS = ("the a cache layer token prefill decode store key value block page "
            + "tensor engine proxy request stream latency memory transfer hidden state model head query attention "
            + "shared prefix node batch queue first time").split(" ");
    private static final String[] PREAMBLES = {
        "You are a helpful assistant. Answer briefly and precisely. ",
        "System: the following is a transcript of a support conversation about KV caches. ",
        "Context: disaggregated prefill moves the KV cache from a prefill node to a decode node. ",
    };

    private Workload() {
    }

    /**
     * Builds {@code n} prompts whose lengths spread over {@code [minBytes, maxBytes]}.
     *
     * @param n number of prompts
     * @param minBytes shortest prompt, in bytes (= tokens for the byte tokenizer)
     * @param maxBytes longest prompt, in bytes
     * @param seed the random seed; the same seed gives the same prompts
     */
    static List<String> prompts(int n, int minBytes, int maxBytes, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int target = n == 1 ? maxBytes : minBytes + (int) ((long) (maxBytes - minBytes) * ((i * 7L) % n) / (n - 1));
            StringBuilder sb = new StringBuilder(target + 16);
            if (i % 3 == 0 && target > 96) {
                sb.append(PREAMBLES[(i / 3) % PREAMBLES.length]);
            }
            sb.append("Request ").append(i).append(':');
            while (sb.length() < target) {
                sb.append(' ').append(WORDS[rnd.nextInt(WORDS.length)]);
            }
            sb.setLength(target);
            out.add(sb.toString());
        }
        return out;
    }
}
