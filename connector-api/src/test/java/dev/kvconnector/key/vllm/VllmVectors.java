package dev.kvconnector.key.vllm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;

/**
 * The shared vLLM V1 vectors ({@code shared/spec/vllm-v1-mooncake-store-vectors.json}, copied unchanged into the
 * test resources): made with functions copied from vLLM and checked against Python's pickle and cbor2.
 */
final class VllmVectors {
    static final JsonNode ROOT = load();

    private VllmVectors() {
    }

    private static JsonNode load() {
        try (InputStream in = VllmVectors.class.getResourceAsStream("/vllm-v1/vllm-v1-mooncake-store-vectors.json")) {
            if (in == null) {
                throw new IllegalStateException("test resource vllm-v1/vllm-v1-mooncake-store-vectors.json is missing");
            }
            return new ObjectMapper().readTree(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static int[] tokens(int caseId) {
        for (JsonNode c : ROOT.get("cases")) {
            if (c.get("case").asInt() == caseId) {
                JsonNode ids = c.get("token_ids");
                int[] out = new int[ids.size()];
                for (int i = 0; i < out.length; i++) {
                    out[i] = ids.get(i).asInt();
                }
                return out;
            }
        }
        throw new IllegalArgumentException("no case " + caseId);
    }

    /** The PYTHONHASHSEED of a vector's seed_mode, or null for "default". */
    static String seed(JsonNode vector) {
        String mode = vector.get("seed_mode").asText();
        return mode.equals("default") ? null : mode.substring("PYTHONHASHSEED=".length());
    }

    static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>(array.size());
        array.forEach(n -> out.add(n.asText()));
        return out;
    }

    static String textOrNull(JsonNode node, String field) {
        JsonNode n = node.get(field);
        return n == null || n.isNull() ? null : n.asText();
    }
}
