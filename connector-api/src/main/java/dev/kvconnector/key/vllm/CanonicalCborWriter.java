package dev.kvconnector.key.vllm;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The bytes of {@code cbor2.dumps(value, canonical=True)} for {@code bytes}, {@code str}, {@code None}, {@code int}
 * and tuples (RFC 8949 core deterministic encoding): every head in its shortest form, tuples as definite-length
 * arrays (major type 4), {@code bytes} as major type 2, {@code str} as UTF-8 major type 3, {@code None} as
 * {@code 0xf6}, non-negative ints as major type 0 and negative ones as major type 1 holding {@code -1 - n}.
 */
final class CanonicalCborWriter implements PythonValueWriter {
    private static final int UNSIGNED = 0;
    private static final int NEGATIVE = 1;
    private static final int BYTE_STRING = 2;
    private static final int TEXT_STRING = 3;
    private static final int ARRAY = 4;
    private static final int NULL = 0xF6;

    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    CanonicalCborWriter() {
    }

    @Override
    public void bytes(byte[] value) {
        head(BYTE_STRING, value.length);
        out.writeBytes(value);
    }

    @Override
    public void str(String value) {
        byte[] utf8 = value.getBytes(StandardCharsets.UTF_8);
        head(TEXT_STRING, utf8.length);
        out.writeBytes(utf8);
    }

    @Override
    public void none() {
        out.write(NULL);
    }

    @Override
    public void integer(long value) {
        if (value >= 0) {
            head(UNSIGNED, value);
        } else {
            head(NEGATIVE, -1 - value);
        }
    }

    @Override
    public void beginTuple(int size) {
        head(ARRAY, size);
    }

    @Override
    public void endTuple(int size) {
        // a definite-length array needs no end marker
    }

    @Override
    public byte[] finish() {
        return out.toByteArray();
    }

    /** A head with {@code argument} read as unsigned 64 bits, in the shortest of the five forms. */
    private void head(int majorType, long argument) {
        int major = majorType << 5;
        if (argument >= 0 && argument < 24) {
            out.write(major | (int) argument);
        } else if (argument >= 0 && argument <= 0xFF) {
            out.write(major | 24);
            out.write((int) argument);
        } else if (argument >= 0 && argument <= 0xFFFF) {
            out.write(major | 25);
            bigEndian(argument, 2);
        } else if (argument >= 0 && argument <= 0xFFFF_FFFFL) {
            out.write(major | 26);
            bigEndian(argument, 4);
        } else {
            out.write(major | 27);
            bigEndian(argument, 8);
        }
    }

    private void bigEndian(long value, int bytes) {
        for (int i = bytes - 1; i >= 0; i--) {
            out.write((int) (value >> (8 * i)));
        }
    }
}
