package dev.kvconnector.lmcache.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SequencedMap;
import java.util.regex.Pattern;

/**
 * LMCache v1 key strings: {@code model@world_size@worker_id@chunk_hash_hex@dtype[@layer][@tag%value...]}.
 *
 * <p>The chunk hash comes from the caller (the engine's own chunk hashes, or one documented deterministic
 * scheme): LMCache v1 hashes with Python's {@code hash()} by default, which no other process can reproduce.
 * Hex digits are lower case; a leading {@code -} is allowed because Python hashes are signed.
 *
 * <p>dtype names are those of the spec ({@code half, bfloat16, float, double, int8, uint8, fp8_e4m3fn,
 * fp8_e5m2}). Parsing also accepts {@code fp8_e4m3}, the name some LMCache releases write for float8_e4m3fn.
 */
public final class LmcacheV1Keys {
    private static final Pattern HASH = Pattern.compile("-?[0-9a-f]+");
    private static final Pattern LAYER = Pattern.compile("[0-9]+");

    /**
     * A parsed v1 key.
     *
     * @param model     the model name, without {@code @}
     * @param worldSize the tensor-parallel world size, at least 1
     * @param workerId  this worker's rank, in {@code 0..worldSize-1}
     * @param chunkHash the chunk hash in lower-case hex
     * @param dtype     the KV dtype
     * @param layer     the layer index for a per-layer key, or -1 for a whole-chunk key
     * @param tags      tags in key order, unmodifiable
     */
    public record Key(String model, int worldSize, int workerId, String chunkHash, DType dtype, int layer,
                      SequencedMap<String, String> tags) {
        /** The key string. */
        @Override
        public String toString() {
            return format(model, worldSize, workerId, chunkHash, dtype, layer, tags);
        }
    }

    private LmcacheV1Keys() {
    }

    /** A whole-chunk key (no layer). */
    public static String chunkKey(String model, int worldSize, int workerId, String chunkHashHex, DType dtype,
                                  SequencedMap<String, String> tags) {
        return format(model, worldSize, workerId, chunkHashHex, dtype, -1, tags);
    }

    /** A per-layer key: {@code @layer} follows the dtype. */
    public static String layerKey(String model, int worldSize, int workerId, String chunkHashHex, DType dtype,
                                  int layer, SequencedMap<String, String> tags) {
        if (layer < 0) {
            throw invalid("layer " + layer + " is negative", null);
        }
        return format(model, worldSize, workerId, chunkHashHex, dtype, layer, tags);
    }

    private static String format(String model, int worldSize, int workerId, String hash, DType dtype, int layer,
                                 Map<String, String> tags) {
        return keyAfter(LmcacheKeyParts.workerPrefix(model, worldSize, workerId), hash, dtype, layer, tags);
    }

    /**
     * The key after its {@code model@world_size@worker_id@} part, {@code workerPrefix}
     * ({@link LmcacheKeyParts#workerPrefix}, which checks the model and worker).
     *
     * @param layer the layer index, or -1 for a whole-chunk key
     * @param tags  the tags in key order, or null for none
     */
    static String keyAfter(String workerPrefix, String hash, DType dtype, int layer, Map<String, String> tags) {
        requireHexHash(hash, null);
        StringBuilder sb = new StringBuilder(workerPrefix).append(hash).append('@').append(dtypeName(dtype));
        if (layer >= 0) {
            sb.append('@').append(layer);
        }
        if (tags != null) {
            for (Map.Entry<String, String> t : tags.entrySet()) {
                String k = t.getKey();
                String v = t.getValue();
                if (k.isEmpty() || k.indexOf('@') >= 0 || k.indexOf('%') >= 0 || v == null || v.indexOf('@') >= 0) {
                    throw invalid("tag '" + k + "'='" + v + "' is empty or holds '@' or '%'", null);
                }
                sb.append('@').append(k).append('%').append(v);
            }
        }
        return sb.toString();
    }

    /**
     * Parses a v1 key.
     *
     * @throws KVException {@code INVALID_ARGUMENT} naming the part that is wrong
     */
    public static Key parse(String key) {
        String[] parts = key.split("@", -1);
        if (parts.length < 5) {
            throw invalid("a v1 key has at least 5 '@'-separated parts (model, world size, worker, hash, dtype); "
                    + "found " + parts.length, key);
        }
        LmcacheKeyParts.requireModel(parts[0], key);
        int worldSize = parseInt(parts[1], "world size", key);
        int workerId = parseInt(parts[2], "worker id", key);
        LmcacheKeyParts.requireWorker(worldSize, workerId, key);
        requireHexHash(parts[3], key);
        DType dtype = dtypeOf(parts[4]);
        int layer = -1;
        int i = 5;
        if (i < parts.length && LAYER.matcher(parts[i]).matches()) {
            layer = parseInt(parts[i], "layer", key);
            i++;
        }
        SequencedMap<String, String> tags = new LinkedHashMap<>();
        for (; i < parts.length; i++) {
            int pct = parts[i].indexOf('%');
            if (pct <= 0) {
                throw invalid("part '" + parts[i] + "' is neither a layer index nor a tag%value", key);
            }
            tags.put(parts[i].substring(0, pct), parts[i].substring(pct + 1));
        }
        return new Key(parts[0], worldSize, workerId, parts[3], dtype, layer, Collections.unmodifiableSequencedMap(
                tags));
    }

    /**
     * The v1 key name of a dtype.
     *
     * @throws KVException {@code DTYPE_MISMATCH} for int32 and int64, which LMCache has no name for
     */
    public static String dtypeName(DType dtype) {
        return switch (dtype) {
            case FP16 -> "half";
            case BF16 -> "bfloat16";
            case FP32 -> "float";
            case FP64 -> "double";
            case INT8 -> "int8";
            case UINT8 -> "uint8";
            case FP8_E4M3 -> "fp8_e4m3fn";
            case FP8_E5M2 -> "fp8_e5m2";
            case INT32, INT64 -> throw KVException.of(ErrorCode.DTYPE_MISMATCH, "LMCache keys have no name for "
                    + dtype).hint("LMCache stores KV in half, bfloat16, float, double, int8, uint8 or fp8").build();
        };
    }

    /**
     * The dtype of a v1 key name.
     *
     * @throws KVException {@code DTYPE_MISMATCH} for an unknown name
     */
    public static DType dtypeOf(String name) {
        return switch (name) {
            case "half", "float16" -> DType.FP16;
            case "bfloat16" -> DType.BF16;
            case "float", "float32" -> DType.FP32;
            case "double", "float64" -> DType.FP64;
            case "int8" -> DType.INT8;
            case "uint8" -> DType.UINT8;
            case "fp8_e4m3fn", "fp8_e4m3" -> DType.FP8_E4M3;
            case "fp8_e5m2" -> DType.FP8_E5M2;
            default -> throw KVException.of(ErrorCode.DTYPE_MISMATCH, "unknown LMCache dtype name '" + name + "'")
                    .hint("known: half, bfloat16, float, double, int8, uint8, fp8_e4m3fn, fp8_e5m2").build();
        };
    }

    private static void requireHexHash(String hash, String key) {
        if (hash == null || !HASH.matcher(hash).matches()) {
            throw invalid("chunk hash '" + hash + "' is not lower-case hex", key);
        }
    }

    private static int parseInt(String s, String what, String key) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw invalid(what + " '" + s + "' is not an integer", key);
        }
    }

    private static KVException invalid(String detail, String key) {
        return LmcacheKeyParts.invalid(detail, key).build();
    }
}
