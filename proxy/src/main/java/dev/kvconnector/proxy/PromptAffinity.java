package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Hashes the start of a request's prompt for {@link Policy#PREFIX_AFFINITY}: the {@code prompt} of a
 * completion (text, token ids or a list of them) or the message contents of a chat, up to a budget of
 * characters (a token id counts as one), without building a string.
 */
final class PromptAffinity {
    private long hash = 0xcbf29ce484222325L;
    private int budget;

    private PromptAffinity(int budget) {
        this.budget = budget;
    }

    static long hash(JsonNode body, int maxChars) {
        PromptAffinity a = new PromptAffinity(maxChars);
        JsonNode prompt = body.get("prompt");
        if (prompt != null) {
            a.feed(prompt);
        } else {
            JsonNode messages = body.get("messages");
            if (messages != null && messages.isArray()) {
                for (JsonNode m : messages) {
                    if (a.budget <= 0) {
                        break;
                    }
                    a.feed(m.get("content"));
                }
            }
        }
        return a.hash;
    }

    private void feed(JsonNode node) {
        if (node == null || budget <= 0) {
            return;
        }
        if (node.isTextual()) {
            String s = node.textValue();
            int n = Math.min(budget, s.length());
            for (int i = 0; i < n; i++) {
                mixIn(s.charAt(i));
            }
            budget -= n;
        } else if (node.isIntegralNumber()) {
            mixIn(node.longValue());
            budget--;
        } else if (node.isArray()) {
            for (JsonNode e : node) {
                if (budget <= 0) {
                    return;
                }
                feed(e);
            }
        } else if (node.isObject()) {
            feed(node.get("text"));
        }
    }

    private void mixIn(long v) {
        hash ^= v;
        hash *= 0x100000001b3L;
    }
}
