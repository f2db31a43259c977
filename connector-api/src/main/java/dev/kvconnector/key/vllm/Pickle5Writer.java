package dev.kvconnector.key.vllm;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The bytes of {@code pickle.dumps(value, protocol=5)} for {@code bytes}, {@code str}, {@code None}, {@code int} and
 * tuples, as CPython 3.8 to 3.13 writes them (the C pickler and {@code pickle.py} agree byte for byte).
 *
 * <ul>
 *   <li>{@code PROTO 5}, then the body in frames: a frame is closed when it holds at least 64 KiB at the start of
 *       the next value, and one shorter than 4 bytes gets no {@code FRAME} header.</li>
 *   <li>{@code int}: {@code BININT1} for 0..255, {@code BININT2} for 256..65535, {@code BININT} for the rest of
 *       int32, else {@code LONG1} with Python's minimal two's complement bytes.</li>
 *   <li>{@code bytes} and {@code str}: the short forms up to 255 bytes, the 4-byte-length forms above; from 64 KiB
 *       on, the payload is written outside any frame, as Python does. Each is followed by {@code MEMOIZE}.</li>
 *   <li>Tuples: {@code EMPTY_TUPLE}; {@code TUPLE1..3} after 1 to 3 items; {@code MARK} items {@code TUPLE}
 *       above; then {@code MEMOIZE} (not after the empty tuple).</li>
 * </ul>
 *
 * <p>Python memoises by object identity and writes {@code BINGET} when the same object comes again. vLLM's hash
 * tuples hold each object once, so this writer never repeats one; a LoRA name and a cache salt that are the very
 * same Python object (such as one interned one-character string) would pickle differently and are not covered.
 */
final class Pickle5Writer implements PythonValueWriter {
    /** Python's {@code _Framer._FRAME_SIZE_TARGET}, bytes. */
    static final int FRAME_SIZE_TARGET = 64 * 1024;
    private static final int FRAME_SIZE_MIN = 4;

    private static final int PROTO = 0x80;
    private static final int FRAME = 0x95;
    private static final int STOP = '.';
    private static final int MEMOIZE = 0x94;
    private static final int NONE = 'N';
    private static final int BININT1 = 'K';
    private static final int BININT2 = 'M';
    private static final int BININT = 'J';
    private static final int LONG1 = 0x8A;
    private static final int SHORT_BINBYTES = 'C';
    private static final int BINBYTES = 'B';
    private static final int SHORT_BINUNICODE = 0x8C;
    private static final int BINUNICODE = 'X';
    private static final int EMPTY_TUPLE = ')';
    private static final int MARK = '(';
    private static final int TUPLE = 't';
    private static final int[] SMALL_TUPLES = {EMPTY_TUPLE, 0x85, 0x86, 0x87};

    private final ByteArrayOutputStream out = new ByteArrayOutputStream();
    private final ByteArrayOutputStream frame = new ByteArrayOutputStream();

    Pickle5Writer() {
        out.write(PROTO);
        out.write(5);
    }

    @Override
    public void bytes(byte[] value) {
        startValue();
        sized(value, SHORT_BINBYTES, BINBYTES);
    }

    @Override
    public void str(String value) {
        startValue();
        sized(value.getBytes(StandardCharsets.UTF_8), SHORT_BINUNICODE, BINUNICODE);
    }

    @Override
    public void none() {
        startValue();
        frame.write(NONE);
    }

    @Override
    public void integer(long value) {
        startValue();
        if (value >= 0 && value <= 0xFF) {
            frame.write(BININT1);
            frame.write((int) value);
        } else if (value >= 0 && value <= 0xFFFF) {
            frame.write(BININT2);
            littleEndian(frame, value, 2);
        } else if (value >= Integer.MIN_VALUE && value <= Integer.MAX_VALUE) {
            frame.write(BININT);
            littleEndian(frame, value, 4);
        } else {
            long magnitude = value == Long.MIN_VALUE ? Long.MIN_VALUE : Math.abs(value);
            int bitLength = Long.SIZE - Long.numberOfLeadingZeros(magnitude);
            int n = (bitLength >> 3) + 1;
            // encode_long: a negative number whose top byte is only sign extension drops it
            if (value < 0 && n > 1 && byteAt(value, n - 1) == 0xFF && (byteAt(value, n - 2) & 0x80) != 0) {
                n--;
            }
            frame.write(LONG1);
            frame.write(n);
            littleEndian(frame, value, n);
        }
    }

    @Override
    public void beginTuple(int size) {
        startValue();
        if (size == 0) {
            frame.write(EMPTY_TUPLE);
        } else if (size > 3) {
            frame.write(MARK);
        }
    }

    @Override
    public void endTuple(int size) {
        if (size == 0) {
            return;
        }
        frame.write(size <= 3 ? SMALL_TUPLES[size] : TUPLE);
        frame.write(MEMOIZE);
    }

    @Override
    public byte[] finish() {
        frame.write(STOP);
        commitFrame();
        return out.toByteArray();
    }

    /** Python's {@code save()} starts by closing a full frame. */
    private void startValue() {
        if (frame.size() >= FRAME_SIZE_TARGET) {
            commitFrame();
        }
    }

    private void sized(byte[] payload, int shortOpcode, int longOpcode) {
        if (payload.length <= 0xFF) {
            frame.write(shortOpcode);
            frame.write(payload.length);
            frame.writeBytes(payload);
        } else if (payload.length >= FRAME_SIZE_TARGET) {
            commitFrame();
            out.write(longOpcode);
            littleEndian(out, payload.length, 4);
            out.writeBytes(payload);
        } else {
            frame.write(longOpcode);
            littleEndian(frame, payload.length, 4);
            frame.writeBytes(payload);
        }
        frame.write(MEMOIZE);
    }

    private void commitFrame() {
        if (frame.size() >= FRAME_SIZE_MIN) {
            out.write(FRAME);
            littleEndian(out, frame.size(), 8);
        }
        out.writeBytes(frame.toByteArray());
        frame.reset();
    }

    private static void littleEndian(ByteArrayOutputStream to, long value, int bytes) {
        for (int i = 0; i < bytes; i++) {
            to.write(byteAt(value, i));
        }
    }

    /** Byte {@code i} (0 = least significant) of {@code value} sign-extended to any width. */
    private static int byteAt(long value, int i) {
        return (int) ((i < Long.BYTES ? value >> (8 * i) : value >> 63) & 0xFF);
    }
}
