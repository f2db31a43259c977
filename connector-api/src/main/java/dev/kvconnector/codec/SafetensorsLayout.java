package dev.kvconnector.codec;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The encoded form of a set of named tensor specs in safetensors, computed once: the header bytes, where each
 * tensor's data go and the total size. Build it with {@link Safetensors#layout}, keep it while the shapes stay
 * the same, and write objects with it without re-encoding JSON.
 *
 * <p>The bytes match what the reference implementation (the Rust {@code safetensors} crate behind
 * {@code safetensors.torch.save}) writes for the same tensors: tensors sorted by descending dtype alignment, then
 * by name (byte order of UTF-8); compact JSON with {@code __metadata__} first; the header padded with spaces to a
 * multiple of 8 bytes, so that the data buffer starts 8-byte aligned. Metadata entries are written sorted by key;
 * the reference writes them in hash order, so objects with two or more metadata entries may differ in that order.
 *
 * <pre>{@code
 * SafetensorsLayout layout = Safetensors.layout(Map.of("k", kSpec, "v", vSpec), Map.of());
 * MemorySegment obj = staging.asSlice(0, layout.encodedSize());
 * layout.writeHeader(obj);
 * gather(layout.slice(obj, "k")); gather(layout.slice(obj, "v"));    // or layout.write(obj, tensors)
 * }</pre>
 */
public final class SafetensorsLayout {
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final byte[] header;
    private final Map<String, Slot> slots;
    private final long encodedSize;

    private record Slot(TensorSpec spec, long offset) {
    }

    private SafetensorsLayout(byte[] header, Map<String, Slot> slots, long encodedSize) {
        this.header = header;
        this.slots = slots;
        this.encodedSize = encodedSize;
    }

    static SafetensorsLayout of(Map<String, TensorSpec> specs, Map<String, String> metadata) {
        if (specs == null || metadata == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "tensor specs and metadata must not be null")
                    .operation("encode").build();
        }
        List<Map.Entry<String, TensorSpec>> sorted = new ArrayList<>(specs.entrySet());
        for (Map.Entry<String, TensorSpec> e : sorted) {
            if (e.getKey() == null || e.getValue() == null || e.getKey().equals(Safetensors.METADATA_KEY)) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "invalid safetensors entry " + e.getKey() + " -> "
                        + e.getValue()).operation("encode")
                        .hint("names and specs must be non-null, and '" + Safetensors.METADATA_KEY + "' is reserved")
                        .build();
            }
        }
        sorted.sort((a, b) -> {
            int byAlignment = Integer.compare(writeOrder(b.getValue().dtype()), writeOrder(a.getValue().dtype()));
            return byAlignment != 0 ? byAlignment : Arrays.compareUnsigned(utf8(a.getKey()), utf8(b.getKey()));
        });

        StringBuilder json = new StringBuilder(64 + 96 * sorted.size()).append('{');
        if (!metadata.isEmpty()) {
            json.append("\"").append(Safetensors.METADATA_KEY).append("\":{");
            boolean first = true;
            for (Map.Entry<String, String> m : new TreeMap<>(metadata).entrySet()) {
                if (m.getValue() == null) {
                    throw KVException.of(ErrorCode.INVALID_ARGUMENT, "metadata value of '" + m.getKey()
                            + "' is null").operation("encode").build();
                }
                json.append(first ? "" : ",");
                appendString(json, m.getKey()).append(':');
                appendString(json, m.getValue());
                first = false;
            }
            json.append('}');
        }
        long dataOffset = 0;
        List<long[]> offsets = new ArrayList<>(sorted.size());
        for (Map.Entry<String, TensorSpec> e : sorted) {
            TensorSpec spec = e.getValue();
            long end = dataOffset + spec.byteSize();
            if (end < 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "tensors total more than 2^63 bytes at '"
                        + e.getKey() + "'").operation("encode").build();
            }
            json.append(json.length() > 1 ? "," : "");
            appendString(json, e.getKey()).append(":{\"dtype\":\"").append(spec.dtype().safetensorsName())
                    .append("\",\"shape\":[");
            for (int i = 0; i < spec.rank(); i++) {
                json.append(i > 0 ? "," : "").append(spec.dim(i));
            }
            json.append("],\"data_offsets\":[").append(dataOffset).append(',').append(end).append("]}");
            offsets.add(new long[] {dataOffset, end});
            dataOffset = end;
        }
        json.append('}');

        byte[] text = json.toString().getBytes(StandardCharsets.UTF_8);
        int padded = (text.length + 7) & ~7;
        if (padded > Safetensors.DEFAULT_MAX_HEADER_BYTES) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "safetensors header of " + padded
                    + " bytes exceeds the readers' limit of " + Safetensors.DEFAULT_MAX_HEADER_BYTES)
                    .operation("encode").hint("split the tensors over several objects").build();
        }
        byte[] header = new byte[Safetensors.LENGTH_PREFIX_BYTES + padded];
        System.arraycopy(text, 0, header, Safetensors.LENGTH_PREFIX_BYTES, text.length);
        Arrays.fill(header, Safetensors.LENGTH_PREFIX_BYTES + text.length, header.length, (byte) ' ');
        MemorySegment.ofArray(header).set(U64, 0, padded);

        Map<String, Slot> slots = new LinkedHashMap<>();
        for (int i = 0; i < sorted.size(); i++) {
            slots.put(sorted.get(i).getKey(), new Slot(sorted.get(i).getValue(), header.length + offsets.get(i)[0]));
        }
        if (header.length + dataOffset < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "safetensors object exceeds 2^63 bytes")
                    .operation("encode").build();
        }
        return new SafetensorsLayout(header, Collections.unmodifiableMap(slots), header.length + dataOffset);
    }

    /** The object's total size in bytes: 8-byte length, padded JSON header and data. */
    public long encodedSize() {
        return encodedSize;
    }

    /** Bytes before the data buffer: the 8-byte length plus the padded JSON header (a multiple of 8). */
    public long headerBytes() {
        return header.length;
    }

    /** The JSON header as written, padding included (for tools and tests). */
    public String headerJson() {
        return new String(header, Safetensors.LENGTH_PREFIX_BYTES, header.length - Safetensors.LENGTH_PREFIX_BYTES,
                StandardCharsets.UTF_8);
    }

    /** Tensor names in the order their data are written. */
    public List<String> names() {
        return List.copyOf(slots.keySet());
    }

    /** The spec of tensor {@code name}. */
    public TensorSpec spec(String name) {
        return slot(name).spec();
    }

    /** Where tensor {@code name}'s data start, in bytes from the start of the object. */
    public long dataOffset(String name) {
        return slot(name).offset();
    }

    /** Writes the length prefix and JSON header into the first {@link #headerBytes()} bytes of {@code target}. */
    public void writeHeader(MemorySegment target) {
        checkTarget(target);
        MemorySegment.copy(header, 0, target, ValueLayout.JAVA_BYTE, 0, header.length);
    }

    /** The bytes of {@code target} where tensor {@code name}'s data go, for gathering in place (no copy). */
    public MemorySegment slice(MemorySegment target, String name) {
        checkTarget(target);
        Slot s = slot(name);
        return target.asSlice(s.offset(), s.spec().byteSize());
    }

    /**
     * Writes the whole object: the header, then each tensor's bytes copied from its segment.
     *
     * @param target at least {@link #encodedSize()} bytes
     * @param tensors one host tensor per name of this layout, with the spec the layout was built for
     * @return the bytes written, {@link #encodedSize()}
     */
    public long write(MemorySegment target, Map<String, Tensor> tensors) {
        if (tensors.size() != slots.size() || !tensors.keySet().containsAll(slots.keySet())) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "tensors " + tensors.keySet()
                    + " are not the layout's " + slots.keySet()).operation("encode").build();
        }
        for (Map.Entry<String, Slot> e : slots.entrySet()) {
            Tensor t = tensors.get(e.getKey());
            if (!t.spec().equals(e.getValue().spec())) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, "tensor '" + e.getKey() + "' is " + t.spec()
                        + " but the layout was built for " + e.getValue().spec()).operation("encode").build();
            }
            t.requireHostAccessible("encode");
        }
        writeHeader(target);
        for (Map.Entry<String, Slot> e : slots.entrySet()) {
            Slot s = e.getValue();
            MemorySegment.copy(tensors.get(e.getKey()).segment(), 0, target, s.offset(), s.spec().byteSize());
        }
        return encodedSize;
    }

    private Slot slot(String name) {
        Slot s = slots.get(name);
        if (s == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "no tensor '" + name + "' in this layout; it has "
                    + slots.keySet()).operation("encode").build();
        }
        return s;
    }

    private void checkTarget(MemorySegment target) {
        if (target.byteSize() < encodedSize) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "target segment holds " + target.byteSize()
                    + " bytes but the safetensors object needs " + encodedSize + " (header " + header.length
                    + " + data " + (encodedSize - header.length) + ")").operation("encode")
                    .hint("allocate layout.encodedSize() bytes").build();
        }
    }

    /**
     * Rank of a dtype in the reference implementation's {@code Dtype} enum, which lists dtypes by increasing
     * alignment and is what its writer sorts on (descending). Only the relative order matters.
     */
    private static int writeOrder(DType d) {
        return switch (d) {
            case UINT8 -> 4;
            case INT8 -> 5;
            case FP8_E5M2 -> 6;
            case FP8_E4M3 -> 7;
            case FP16 -> 13;
            case BF16 -> 14;
            case INT32 -> 15;
            case FP32 -> 17;
            case FP64 -> 19;
            case INT64 -> 20;
        };
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Appends a JSON string the way serde_json escapes it: short escapes, lower-case {@code \\u00xx}, raw UTF-8. */
    private static StringBuilder appendString(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\b' -> sb.append("\\b");
                case '\f' -> sb.append("\\f");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append("\\u00").append(Character.forDigit(c >> 4, 16)).append(Character.forDigit(c & 15, 16));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"');
    }
}
