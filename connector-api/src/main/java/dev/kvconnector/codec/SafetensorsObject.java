package dev.kvconnector.codec;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * A parsed, validated safetensors object: its metadata and named tensors, which are zero-copy views of the
 * object's segment (valid as long as that segment is). Obtain one with {@link Safetensors#read}.
 */
public final class SafetensorsObject {
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final JsonMapper JSON = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .build();
    private static final Set<String> TENSOR_FIELDS = Set.of("dtype", "shape", "data_offsets");

    private final MemorySegment object;
    private final long dataStart;
    private final Map<String, String> metadata;
    private final Map<String, Entry> entries;

    private record Entry(String name, TensorSpec spec, long begin, long end) {
    }

    private SafetensorsObject(MemorySegment object, long dataStart, Map<String, String> metadata,
                              Map<String, Entry> entries) {
        this.object = object;
        this.dataStart = dataStart;
        this.metadata = metadata;
        this.entries = entries;
    }

    /** The {@code __metadata__} map, empty when the header has none. */
    public Map<String, String> metadata() {
        return metadata;
    }

    /** Tensor names in the order of their data in the object. */
    public List<String> names() {
        return List.copyOf(entries.keySet());
    }

    /** Whether the object holds a tensor named {@code name}. */
    public boolean contains(String name) {
        return entries.containsKey(name);
    }

    /** Bytes before the data buffer: the 8-byte length plus the JSON header. */
    public long dataStart() {
        return dataStart;
    }

    /** The spec of tensor {@code name}; a missing name is {@link ErrorCode#CORRUPT_OBJECT}. */
    public TensorSpec spec(String name) {
        return entry(name).spec();
    }

    /** Tensor {@code name} as a host view of the object's bytes (no copy); a missing name is CORRUPT_OBJECT. */
    public Tensor tensor(String name) {
        Entry e = entry(name);
        return Tensor.host(e.spec(), object.asSlice(dataStart + e.begin(), e.end() - e.begin()));
    }

    private Entry entry(String name) {
        Entry e = entries.get(name);
        if (e == null) {
            throw corrupt("object has no tensor '" + name + "'; it holds " + entries.keySet());
        }
        return e;
    }

    static SafetensorsObject parse(MemorySegment object, long maxHeaderBytes) {
        long size = object.byteSize();
        if (size < Safetensors.LENGTH_PREFIX_BYTES) {
            throw corrupt("object of " + size + " bytes is shorter than the 8-byte header length");
        }
        long n = object.get(U64, 0);
        if (n < 0) {
            throw corrupt("header length " + Long.toUnsignedString(n) + " is 2^63 or more");
        }
        if (n > maxHeaderBytes) {
            throw corrupt("header length " + n + " bytes exceeds the limit of " + maxHeaderBytes + " bytes");
        }
        if (n > size - Safetensors.LENGTH_PREFIX_BYTES) {
            throw corrupt("header length " + n + " bytes exceeds the " + (size - Safetensors.LENGTH_PREFIX_BYTES)
                    + " bytes that follow the length in an object of " + size + " bytes");
        }
        long dataStart = Safetensors.LENGTH_PREFIX_BYTES + n;
        long dataBytes = size - dataStart;
        JsonNode root = parseJson(object.asSlice(Safetensors.LENGTH_PREFIX_BYTES, n));

        Map<String, String> metadata = Map.of();
        List<Entry> list = new ArrayList<>();
        for (Map.Entry<String, JsonNode> field : root.properties()) {
            if (field.getKey().equals(Safetensors.METADATA_KEY)) {
                metadata = parseMetadata(field.getValue());
            } else {
                list.add(parseEntry(field.getKey(), field.getValue()));
            }
        }
        list.sort(Comparator.comparingLong(Entry::begin).thenComparingLong(Entry::end));

        Map<String, Entry> entries = new LinkedHashMap<>();
        long expectedBegin = 0;
        String previous = null;
        for (Entry e : list) {
            if (e.end() > dataBytes) {
                throw corrupt("tensor '" + e.name() + "' data_offsets [" + e.begin() + ", " + e.end()
                        + "] run past the data buffer of " + dataBytes + " bytes");
            }
            if (e.begin() < expectedBegin) {
                throw corrupt("tensor '" + e.name() + "' data_offsets [" + e.begin() + ", " + e.end()
                        + "] overlap tensor '" + previous + "', which ends at " + expectedBegin);
            }
            if (e.begin() > expectedBegin) {
                throw corrupt("gap of " + (e.begin() - expectedBegin) + " bytes at data offset " + expectedBegin
                        + " before tensor '" + e.name() + "': tensors must cover the data buffer without gaps");
            }
            entries.put(e.name(), e);
            expectedBegin = e.end();
            previous = e.name();
        }
        if (expectedBegin != dataBytes) {
            throw corrupt("data buffer holds " + dataBytes + " bytes but the tensors cover only " + expectedBegin
                    + ": " + (dataBytes - expectedBegin) + " trailing bytes belong to no tensor");
        }
        return new SafetensorsObject(object, dataStart, metadata, Collections.unmodifiableMap(entries));
    }

    private static JsonNode parseJson(MemorySegment headerBytes) {
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(headerBytes.toArray(ValueLayout.JAVA_BYTE)))
                    .toString();
        } catch (CharacterCodingException e) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "safetensors header of " + headerBytes.byteSize()
                    + " bytes is not valid UTF-8").operation("decode").cause(e).build();
        }
        if (!text.startsWith("{")) {
            throw corrupt("header does not start with '{' (starts with "
                    + (text.isEmpty() ? "nothing" : "'" + text.substring(0, Math.min(16, text.length())) + "'") + ")");
        }
        try {
            return JSON.readTree(text);
        } catch (JacksonException e) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "safetensors header JSON is malformed: "
                    + e.getOriginalMessage()).operation("decode").cause(e)
                    .hint("the object is not safetensors, or its header was damaged").build();
        }
    }

    private static Map<String, String> parseMetadata(JsonNode node) {
        if (!node.isObject()) {
            throw corrupt("'" + Safetensors.METADATA_KEY + "' must be an object of strings, not " + node.getNodeType());
        }
        Map<String, String> metadata = new TreeMap<>();
        for (Map.Entry<String, JsonNode> m : node.properties()) {
            if (!m.getValue().isTextual()) {
                throw corrupt("metadata value of '" + m.getKey() + "' must be a string, not "
                        + m.getValue().getNodeType());
            }
            metadata.put(m.getKey(), m.getValue().textValue());
        }
        return Collections.unmodifiableMap(metadata);
    }

    private static Entry parseEntry(String name, JsonNode node) {
        if (!node.isObject()) {
            throw corrupt("tensor '" + name + "' must be an object, not " + node.getNodeType());
        }
        for (Map.Entry<String, JsonNode> f : node.properties()) {
            if (!TENSOR_FIELDS.contains(f.getKey())) {
                throw corrupt("tensor '" + name + "' has unknown field '" + f.getKey() + "'");
            }
        }
        JsonNode dtypeNode = node.get("dtype");
        if (dtypeNode == null || !dtypeNode.isTextual()) {
            throw corrupt("tensor '" + name + "' has no string dtype");
        }
        DType dtype = dtypeByName(dtypeNode.textValue());
        if (dtype == null) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "tensor '" + name + "' has dtype '" + dtypeNode.textValue()
                    + "', which kvconnector does not handle").operation("decode")
                    .hint("supported: F16, BF16, F32, F64, F8_E4M3, F8_E5M2, I8, U8, I32, I64").build();
        }
        long[] shape = longs(name, "shape", node.get("shape"));
        if (shape.length > TensorSpec.MAX_RANK) {
            throw corrupt("tensor '" + name + "' has rank " + shape.length + "; kvconnector handles at most "
                    + TensorSpec.MAX_RANK);
        }
        long[] offsets = longs(name, "data_offsets", node.get("data_offsets"));
        if (offsets.length != 2) {
            throw corrupt("tensor '" + name + "' data_offsets must be [begin, end], got " + offsets.length + " numbers");
        }
        long begin = offsets[0];
        long end = offsets[1];
        if (begin > end) {
            throw corrupt("tensor '" + name + "' data_offsets [" + begin + ", " + end + "] begin after they end");
        }
        long bytes = dtype.byteWidth();
        for (long d : shape) {
            long product = bytes * d;
            if (Math.multiplyHigh(bytes, d) != 0 || product < 0) {
                throw corrupt("tensor '" + name + "' shape " + Arrays.toString(shape) + " of "
                        + dtype.safetensorsName() + " overflows 63 bits of bytes");
            }
            bytes = product;
        }
        if (bytes != end - begin) {
            throw corrupt("tensor '" + name + "' is " + dtype.safetensorsName() + Arrays.toString(shape)
                    + ", " + bytes + " bytes, but data_offsets [" + begin + ", " + end + "] span " + (end - begin));
        }
        return new Entry(name, TensorSpec.of(dtype, shape), begin, end);
    }

    private static long[] longs(String name, String field, JsonNode node) {
        if (node == null || !node.isArray()) {
            throw corrupt("tensor '" + name + "' has no " + field + " array");
        }
        long[] out = new long[node.size()];
        for (int i = 0; i < out.length; i++) {
            JsonNode v = node.get(i);
            if (!v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < 0) {
                throw corrupt("tensor '" + name + "' " + field + "[" + i + "] = " + v
                        + " is not an integer in 0..2^63-1");
            }
            out[i] = v.longValue();
        }
        return out;
    }

    private static DType dtypeByName(String name) {
        for (DType d : DType.values()) {
            if (d.safetensorsName().equals(name)) {
                return d;
            }
        }
        return null;
    }

    private static KVException corrupt(String detail) {
        return KVException.of(ErrorCode.CORRUPT_OBJECT, "safetensors: " + detail).operation("decode")
                .hint("the object was not written by a safetensors writer, or its bytes were damaged").build();
    }
}
