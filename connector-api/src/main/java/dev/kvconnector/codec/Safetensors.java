package dev.kvconnector.codec;

import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads and writes the safetensors format from and to memory segments.
 *
 * <p>The format: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON
 * {@code {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {str: str}}}
 * (possibly padded with trailing spaces), then the data buffer; offsets are relative to the data buffer's start.
 *
 * <p>Reading validates as strictly as the reference implementation, and more: see {@link #read(MemorySegment, long)}.
 * Tensor data are returned as zero-copy slices of the object; only the JSON header is copied to the heap.
 * Writing goes through a {@link SafetensorsLayout} that computes the header and size first and then fills a
 * caller-provided segment, copying data segment to segment.
 */
public final class Safetensors {
    /** The reference implementation's largest accepted JSON header, in bytes (100 MB). */
    public static final long DEFAULT_MAX_HEADER_BYTES = 100_000_000L;
    /** The reserved header key of the string-to-string metadata map. */
    public static final String METADATA_KEY = "__metadata__";
    /** Bytes of the little-endian u64 header length at the start of every object. */
    public static final int LENGTH_PREFIX_BYTES = 8;

    private Safetensors() {
    }

    /** Parses and validates an object with the default header limit ({@link #DEFAULT_MAX_HEADER_BYTES}). */
    public static SafetensorsObject read(MemorySegment object) {
        return SafetensorsObject.parse(object, DEFAULT_MAX_HEADER_BYTES);
    }

    /**
     * Parses and validates a safetensors object held exactly by {@code object} (slice it to the object's size).
     * Checks: the header length against {@code maxHeaderBytes} and the bytes present (a length of 2^63 or more
     * is refused); the JSON is well-formed UTF-8, starts with '{', has no duplicate keys and no unknown fields;
     * every dtype is one kvconnector knows; shape times dtype width equals {@code end - begin} without overflow;
     * {@code begin <= end}; tensors neither overlap nor leave gaps, and together cover the data buffer exactly.
     *
     * @param object the object's bytes, host accessible
     * @param maxHeaderBytes the largest JSON header accepted, in bytes
     * @return the parsed object, whose tensors are views of {@code object}
     * @throws dev.kvconnector.error.KVException {@link dev.kvconnector.error.ErrorCode#CORRUPT_OBJECT} naming the
     *     first violation, with offsets and sizes
     */
    public static SafetensorsObject read(MemorySegment object, long maxHeaderBytes) {
        return SafetensorsObject.parse(object, maxHeaderBytes);
    }

    /**
     * The encoded layout of {@code specs} (name to spec) with string {@code metadata} (may be empty): header bytes,
     * data offsets and total size. Compute it once per shape and reuse it.
     */
    public static SafetensorsLayout layout(Map<String, TensorSpec> specs, Map<String, String> metadata) {
        return SafetensorsLayout.of(specs, metadata);
    }

    /** Bytes of the object that {@link #write} produces for tensors of these specs and this metadata. */
    public static long encodedSize(Map<String, TensorSpec> specs, Map<String, String> metadata) {
        return SafetensorsLayout.of(specs, metadata).encodedSize();
    }

    /**
     * Encodes host {@code tensors} with {@code metadata} into {@code target}, which must hold at least
     * {@link #encodedSize} bytes.
     *
     * @return the bytes written
     */
    public static long write(MemorySegment target, Map<String, Tensor> tensors, Map<String, String> metadata) {
        Map<String, TensorSpec> specs = new LinkedHashMap<>();
        tensors.forEach((name, t) -> specs.put(name, t == null ? null : t.spec()));
        return SafetensorsLayout.of(specs, metadata).write(target, tensors);
    }
}
