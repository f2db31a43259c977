package dev.kvconnector.tensor;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * Element types of KV tensors, with their width in bytes and their names in safetensors and torch.
 * {@link #id()} is the stable number written into kvconnector's raw object header; never renumber.
 */
public enum DType {
    /** IEEE 754 half precision. */
    FP16(1, 2, "F16", "torch.float16"),
    /** bfloat16. */
    BF16(2, 2, "BF16", "torch.bfloat16"),
    /** IEEE 754 single precision. */
    FP32(3, 4, "F32", "torch.float32"),
    /** IEEE 754 double precision. */
    FP64(4, 8, "F64", "torch.float64"),
    /** 8-bit float, 4 exponent and 3 mantissa bits (finite, no infinities). */
    FP8_E4M3(5, 1, "F8_E4M3", "torch.float8_e4m3fn"),
    /** 8-bit float, 5 exponent and 2 mantissa bits. */
    FP8_E5M2(6, 1, "F8_E5M2", "torch.float8_e5m2"),
    /** Signed 8-bit integer. */
    INT8(7, 1, "I8", "torch.int8"),
    /** Unsigned 8-bit integer. */
    UINT8(8, 1, "U8", "torch.uint8"),
    /** Signed 32-bit integer. */
    INT32(9, 4, "I32", "torch.int32"),
    /** Signed 64-bit integer. */
    INT64(10, 8, "I64", "torch.int64");

    private static final DType[] BY_ID = new DType[11];

    static {
        for (DType d : values()) {
            BY_ID[d.id] = d;
        }
    }

    private final int id;
    private final int byteWidth;
    private final String safetensorsName;
    private final String torchName;

    DType(int id, int byteWidth, String safetensorsName, String torchName) {
        this.id = id;
        this.byteWidth = byteWidth;
        this.safetensorsName = safetensorsName;
        this.torchName = torchName;
    }

    /** The stable id used in kvconnector's raw format (1..10). */
    public int id() {
        return id;
    }

    /** Bytes per element. */
    public int byteWidth() {
        return byteWidth;
    }

    /** The dtype string in a safetensors header, such as {@code BF16}. */
    public String safetensorsName() {
        return safetensorsName;
    }

    /** The torch name, such as {@code torch.bfloat16}. */
    public String torchName() {
        return torchName;
    }

    /** The dtype with the given raw-format id, or null when the id is unknown. */
    public static DType byIdOrNull(int id) {
        return id > 0 && id < BY_ID.length ? BY_ID[id] : null;
    }

    /** Looks up a safetensors dtype name; unknown names are an {@link ErrorCode#DTYPE_MISMATCH} error. */
    public static DType fromSafetensorsName(String name) {
        for (DType d : values()) {
            if (d.safetensorsName.equals(name)) {
                return d;
            }
        }
        throw KVException.of(ErrorCode.DTYPE_MISMATCH, "unknown safetensors dtype '" + name + "'")
                .hint("supported: F16, BF16, F32, F64, F8_E4M3, F8_E5M2, I8, U8, I32, I64")
                .build();
    }

    /**
     * Parses a user-facing name: the enum name in any case ({@code bf16}), the safetensors name, or the torch
     * name with or without the {@code torch.} prefix ({@code bfloat16}, {@code half}, {@code float}).
     */
    public static DType parse(String name) {
        String n = name.trim();
        String bare = n.startsWith("torch.") ? n.substring(6) : n;
        for (DType d : values()) {
            if (d.name().equalsIgnoreCase(n) || d.safetensorsName.equalsIgnoreCase(n)
                    || d.torchName.substring(6).equalsIgnoreCase(bare)) {
                return d;
            }
        }
        return switch (bare.toLowerCase(java.util.Locale.ROOT)) {
            case "half" -> FP16;
            case "float" -> FP32;
            case "double" -> FP64;
            case "fp8", "fp8_e4m3fn", "float8_e4m3fn" -> FP8_E4M3;
            default -> throw KVException.of(ErrorCode.DTYPE_MISMATCH, "unknown dtype '" + name + "'")
                    .hint("use one of fp16, bf16, fp32, fp64, fp8_e4m3, fp8_e5m2, int8, uint8, int32, int64")
                    .build();
        };
    }
}
