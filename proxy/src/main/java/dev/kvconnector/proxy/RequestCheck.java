package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * Checks the fields of a completion request that the proxy itself relies on, before any instance sees it:
 * {@code model}, {@code prompt} (completions) or {@code messages} (chat), {@code max_tokens},
 * {@code max_completion_tokens}, {@code stream} and {@code n}. Every other field is left to the instances and
 * passes through untouched.
 *
 * <p>As in vLLM, a missing or null {@code model} means the served one, and a null optional field means its
 * default. A wrong type or range is the client's fault (400); a model the proxy does not serve is 404.
 */
final class RequestCheck {

    /** Why a request is refused: the HTTP status, the field at fault and a message naming it and the fix. */
    record Rejection(int status, String param, String message) {
    }

    private RequestCheck() {
    }

    /**
     * Returns null when {@code body} may be sent on, otherwise why not.
     *
     * @param chat  true for {@code /v1/chat/completions}, false for {@code /v1/completions}
     * @param model the model the proxy serves
     */
    static Rejection check(ObjectNode body, boolean chat, String model) {
        JsonNode m = body.get("model");
        if (m != null && !m.isNull()) {
            if (!m.isTextual()) {
                return bad("model", "must be a string (the served model is '" + model + "'), was " + describe(m));
            }
            if (!model.equals(m.textValue())) {
                return new Rejection(404, "model", "'model' is '" + m.textValue() + "', which this proxy does"
                        + " not serve; it serves '" + model + "' (see GET /v1/models)");
            }
        }
        Rejection r = chat ? messages(body.get("messages")) : prompt(body);
        if (r == null) {
            r = positiveInt(body, "max_tokens");
        }
        if (r == null) {
            r = positiveInt(body, "max_completion_tokens");
        }
        if (r == null) {
            r = positiveInt(body, "n");
        }
        if (r == null) {
            JsonNode s = body.get("stream");
            if (s != null && !s.isNull() && !s.isBoolean()) {
                r = bad("stream", "must be true or false, was " + describe(s));
            }
        }
        return r;
    }

    private static Rejection messages(JsonNode messages) {
        if (messages == null || messages.isNull()) {
            return bad("messages", "is missing: a chat completion needs a non-empty array of"
                    + " {\"role\":..,\"content\":..} objects (a plain prompt goes to /v1/completions)");
        }
        if (!messages.isArray() || messages.isEmpty()) {
            return bad("messages", "must be a non-empty array of {\"role\":..,\"content\":..} objects, was "
                    + describe(messages));
        }
        for (int i = 0; i < messages.size(); i++) {
            JsonNode msg = messages.get(i);
            if (!msg.isObject() || !msg.path("role").isTextual()) {
                return bad("messages", "element " + i + " must be an object with a string \"role\", was "
                        + describe(msg));
            }
        }
        return null;
    }

    private static Rejection prompt(ObjectNode body) {
        JsonNode p = body.get("prompt");
        if (p == null || p.isNull()) {
            JsonNode embeds = body.get("prompt_embeds");
            return embeds != null && !embeds.isNull() ? null : bad("prompt", "is missing: a completion needs a"
                    + " prompt (a string, token ids, or a list of either; chat messages go to /v1/chat/completions)");
        }
        if (p.isTextual()) {
            return null;
        }
        if (!p.isArray() || p.isEmpty()) {
            return bad("prompt", "must be a string, an array of token ids, or a non-empty array of strings or of"
                    + " token-id arrays, was " + describe(p));
        }
        JsonNode first = p.get(0);
        for (int i = 0; i < p.size(); i++) {
            JsonNode e = p.get(i);
            boolean ok = first.isTextual() ? e.isTextual()
                    : first.isIntegralNumber() ? isTokenId(e)
                    : first.isArray() && isTokenIds(e);
            if (!ok) {
                return bad("prompt", "element " + i + " is " + describe(e) + ": the elements must all be strings,"
                        + " all token ids (integers from 0), or all non-empty arrays of token ids");
            }
        }
        return null;
    }

    private static boolean isTokenIds(JsonNode a) {
        if (!a.isArray() || a.isEmpty()) {
            return false;
        }
        for (JsonNode e : a) {
            if (!isTokenId(e)) {
                return false;
            }
        }
        return true;
    }

    private static boolean isTokenId(JsonNode e) {
        return e.isIntegralNumber() && e.canConvertToInt() && e.intValue() >= 0;
    }

    /** A null or absent field is the default; otherwise an integer from 1 to {@link Integer#MAX_VALUE}. */
    private static Rejection positiveInt(ObjectNode body, String field) {
        JsonNode v = body.get(field);
        if (v == null || v.isNull()) {
            return null;
        }
        if (!v.isIntegralNumber() || !v.canConvertToInt() || v.intValue() < 1) {
            return bad(field, "must be an integer from 1 to " + Integer.MAX_VALUE + ", was " + describe(v));
        }
        return null;
    }

    private static Rejection bad(String field, String what) {
        return new Rejection(400, field, "'" + field + "' " + what);
    }

    /** The value as the client sent it, cut short, with its JSON type: {@code "x" (a string)}. */
    private static String describe(JsonNode v) {
        String text = v.toString();
        if (text.length() > 60) {
            text = text.substring(0, 57) + "...";
        }
        String type = switch (v.getNodeType()) {
            case STRING -> "a string";
            case NUMBER -> "a number";
            case BOOLEAN -> "a boolean";
            case ARRAY -> v.isEmpty() ? "an empty array" : "an array";
            case OBJECT -> "an object";
            case NULL -> "null";
            default -> v.getNodeType().name().toLowerCase(java.util.Locale.ROOT);
        };
        return text + " (" + type + ")";
    }
}
