package dev.kvconnector.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Typed, strict reads of one JSON object's fields, with errors that name the object, the field, the expected type
 * and what was found. Values of string fields are never echoed in errors, since a field such as a store URI may hold
 * credentials; numbers and booleans are.
 */
final class JsonFields {
    /**
     * Rejects duplicate keys and trailing garbage, which Python's json module would silently accept or drop, and keeps
     * floats as exact decimals so that unknown fields are written back as they came and range checks never round.
     */
    static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .disable(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES)
            .build();

    private static final int MAX_ECHO_CHARS = 40;
    /** Longest numeric string accepted; also keeps the regex below from backtracking over megabytes. */
    private static final int MAX_NUMBER_TEXT = 64;

    private final ObjectNode node;
    private final String subject;
    private final ErrorCode code;

    JsonFields(ObjectNode node, String subject, ErrorCode code) {
        this.node = node;
        this.subject = subject;
        this.code = code;
    }

    /** Parses {@code json}, which must be one JSON object. */
    static ObjectNode parseObject(String json, String subject, ErrorCode code) {
        if (json == null) {
            throw KVException.of(code, subject + " is null, not a JSON object").build();
        }
        JsonNode tree;
        try {
            tree = MAPPER.readTree(json);
        } catch (JsonProcessingException e) {
            String where = e.getLocation() == null ? ""
                    : " at line " + e.getLocation().getLineNr() + ", column " + e.getLocation().getColumnNr();
            throw KVException.of(code, subject + " is not valid JSON: " + e.getOriginalMessage() + where)
                    .hint("pass one JSON object, for example {\"kv_connector\": \"...\", \"kv_role\": \"kv_both\"}")
                    .cause(e).build();
        }
        return requireObject(tree, subject, code);
    }

    static ObjectNode requireObject(JsonNode tree, String subject, ErrorCode code) {
        if (tree == null || !tree.isObject()) {
            throw KVException.of(code, subject + " must be a JSON object, got " + describe(tree)).build();
        }
        return (ObjectNode) tree;
    }

    /** Fails on the first field not in {@code known}, suggesting the closest known name. */
    void rejectUnknown(Collection<String> known) {
        for (String name : (Iterable<String>) node::fieldNames) {
            if (!known.contains(name)) {
                String closest = closest(name, known);
                throw KVException.of(code, subject + ": unknown field '" + name + "'"
                                + (closest == null ? "" : " (did you mean '" + closest + "'?)"))
                        .hint("known fields: " + String.join(", ", known)).build();
            }
        }
    }

    /** Whether the field is present, null or not. */
    boolean isPresent(String field) {
        return node.has(field);
    }

    /** Whether the field is present with the value JSON null. */
    boolean isExplicitNull(String field) {
        JsonNode v = node.get(field);
        return v != null && v.isNull();
    }

    /** A string field, or null when absent or JSON null. */
    String string(String field) {
        JsonNode v = present(field);
        if (v == null) {
            return null;
        }
        if (!v.isTextual()) {
            throw wrongType(field, "a string", v);
        }
        return v.textValue();
    }

    /** A boolean field, or null when absent or JSON null. */
    Boolean bool(String field) {
        JsonNode v = present(field);
        if (v == null) {
            return null;
        }
        if (!v.isBoolean()) {
            throw wrongType(field, "a boolean (true or false)", v);
        }
        return v.booleanValue();
    }

    /**
     * An integer field in {@code [min, max]}, or null when absent or JSON null. With {@code lenient}, a float with no
     * fractional part and a string holding a decimal integer are accepted too, as pydantic's lax mode does for vLLM.
     */
    Integer integer(String field, int min, int max, boolean lenient) {
        JsonNode v = present(field);
        return v == null ? null : toInt(field, v, min, max, lenient);
    }

    /**
     * A finite number field, or null when absent or JSON null. With {@code lenient}, a string holding a decimal number
     * is accepted too.
     */
    Double number(String field, boolean lenient) {
        JsonNode v = present(field);
        if (v == null) {
            return null;
        }
        double d;
        if (v.isNumber()) {
            d = v.doubleValue();
        } else if (lenient && v.isTextual() && v.textValue().length() <= MAX_NUMBER_TEXT
                && v.textValue().strip().matches("[+-]?(\\d+\\.?\\d*|\\.\\d+)([eE][+-]?\\d+)?")) {
            d = Double.parseDouble(v.textValue().strip());
        } else {
            throw wrongType(field, "a number", v);
        }
        if (!Double.isFinite(d)) {
            throw wrongType(field, "a finite number", v);
        }
        return d;
    }

    /** An object field, or null when absent or JSON null. */
    ObjectNode object(String field) {
        JsonNode v = present(field);
        if (v == null) {
            return null;
        }
        if (!v.isObject()) {
            throw wrongType(field, "a JSON object", v);
        }
        return (ObjectNode) v;
    }

    /** A list of strings, or null when absent or JSON null; elements may not be null. */
    List<String> strings(String field) {
        JsonNode v = array(field, "a list of strings");
        if (v == null) {
            return null;
        }
        List<String> out = new ArrayList<>(v.size());
        for (int i = 0; i < v.size(); i++) {
            JsonNode e = v.get(i);
            if (!e.isTextual()) {
                throw wrongType(field + "[" + i + "]", "a string", e);
            }
            out.add(e.textValue());
        }
        return List.copyOf(out);
    }

    /** A list of integers in {@code [min, max]}, or null when absent or JSON null. */
    List<Integer> ints(String field, int min, int max) {
        JsonNode v = array(field, "a list of integers");
        if (v == null) {
            return null;
        }
        List<Integer> out = new ArrayList<>(v.size());
        for (int i = 0; i < v.size(); i++) {
            out.add(toInt(field + "[" + i + "]", v.get(i), min, max, false));
        }
        return List.copyOf(out);
    }

    private JsonNode array(String field, String expected) {
        JsonNode v = present(field);
        if (v == null) {
            return null;
        }
        if (!v.isArray()) {
            throw wrongType(field, expected, v);
        }
        return v;
    }

    private JsonNode present(String field) {
        JsonNode v = node.get(field);
        return v == null || v.isNull() ? null : v;
    }

    private int toInt(String field, JsonNode v, int min, int max, boolean lenient) {
        String expected = "an integer in [" + min + ", " + max + "]";
        BigDecimal value;
        if (v.isIntegralNumber()) {
            value = new BigDecimal(v.bigIntegerValue());
        } else if (lenient && v.isFloatingPointNumber()) {
            value = v.decimalValue();
        } else if (lenient && v.isTextual() && v.textValue().strip().matches("[+-]?\\d{1,30}")) {
            value = new BigDecimal(v.textValue().strip());
        } else {
            throw wrongType(field, expected, v);
        }
        // Range first: converting 1e999999999 to an integer would take minutes and gigabytes.
        if (value.compareTo(BigDecimal.valueOf(min)) < 0 || value.compareTo(BigDecimal.valueOf(max)) > 0
                || value.stripTrailingZeros().scale() > 0) {
            throw wrongType(field, expected, v);
        }
        return value.intValueExact();
    }

    KVException wrongType(String field, String expected, JsonNode got) {
        return KVException.of(code, subject + ": field '" + field + "' must be " + expected + ", got " + describe(got))
                .build();
    }

    static String describe(JsonNode v) {
        if (v == null || v.isMissingNode()) {
            return "nothing";
        }
        if (v.isNull()) {
            return "null";
        }
        if (v.isTextual()) {
            return "a string";
        }
        if (v.isBoolean()) {
            return "boolean " + v.booleanValue();
        }
        if (v.isNumber()) {
            String text = v.isFloatingPointNumber() && !Double.isFinite(v.doubleValue())
                    ? "out of double range" : v.asText();
            return "number " + (text.length() > MAX_ECHO_CHARS ? text.substring(0, MAX_ECHO_CHARS) + "..." : text);
        }
        if (v.isArray()) {
            return "a list";
        }
        return v.isObject() ? "a JSON object" : v.getNodeType().toString().toLowerCase(java.util.Locale.ROOT);
    }

    /** A deep, unmodifiable copy of a JSON object as plain Java values (Map, List, String, Number, Boolean, null). */
    static Map<String, Object> toFrozenMap(ObjectNode object) {
        Map<String, Object> out = new LinkedHashMap<>();
        object.properties().forEach(e -> out.put(e.getKey(), toFrozen(e.getValue())));
        return Collections.unmodifiableMap(out);
    }

    private static Object toFrozen(JsonNode v) {
        if (v.isObject()) {
            return toFrozenMap((ObjectNode) v);
        }
        if (v.isArray()) {
            List<Object> list = new ArrayList<>(v.size());
            v.forEach(e -> list.add(toFrozen(e)));
            return Collections.unmodifiableList(list);
        }
        if (v.isTextual()) {
            return v.textValue();
        }
        if (v.isBoolean()) {
            return v.booleanValue();
        }
        if (v.isIntegralNumber()) {
            return v.canConvertToLong() ? (Object) v.longValue() : v.bigIntegerValue();
        }
        if (v.isNumber()) {
            double d = v.doubleValue();
            return Double.isFinite(d) ? (Object) d : (Object) v.decimalValue();
        }
        return null;
    }

    private static String closest(String name, Collection<String> known) {
        String best = null;
        int bestDistance = 3;
        for (String k : known) {
            int d = editDistance(name, k);
            if (d < bestDistance) {
                bestDistance = d;
                best = k;
            }
        }
        return best;
    }

    private static int editDistance(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int sub = prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                cur[j] = Math.min(sub, Math.min(prev[j], cur[j - 1]) + 1);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }
}
