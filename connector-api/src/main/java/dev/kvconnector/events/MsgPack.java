package dev.kvconnector.events;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The subset of MessagePack (https://github.com/msgpack/msgpack/blob/master/spec.md) that vLLM's KV events use: nil,
 * booleans, integers, floats, strings, binaries, arrays, and maps (skipped). Written here rather than taken from
 * org.msgpack:msgpack-core because msgpack-core 0.9.10 reads and writes through {@code sun.misc.Unsafe}, whose memory
 * methods JDK 25 warns about as terminally deprecated on first use; the format itself is a page of spec.
 */
final class MsgPack {
    private MsgPack() {
    }

    /** Appends values to a growing byte array. Not thread-safe. */
    static final class Writer {
        private byte[] buf = new byte[256];
        private int len;

        Writer reset() {
            len = 0;
            return this;
        }

        byte[] toByteArray() {
            return Arrays.copyOf(buf, len);
        }

        private void ensure(int n) {
            if (len + n > buf.length) {
                buf = Arrays.copyOf(buf, Math.max(buf.length * 2, len + n));
            }
        }

        private void put(int b) {
            ensure(1);
            buf[len++] = (byte) b;
        }

        private void putBE(long v, int bytes) {
            ensure(bytes);
            for (int i = bytes - 1; i >= 0; i--) {
                buf[len++] = (byte) (v >>> (8 * i));
            }
        }

        Writer nil() {
            put(0xc0);
            return this;
        }

        Writer array(int n) {
            if (n < 16) {
                put(0x90 | n);
            } else if (n < 65536) {
                put(0xdc);
                putBE(n, 2);
            } else {
                put(0xdd);
                putBE(n, 4);
            }
            return this;
        }

        Writer integer(long v) {
            if (v >= 0 && v < 128) {
                put((int) v);
            } else if (v >= -32 && v < 0) {
                put((int) v & 0xff);
            } else {
                put(0xd3);
                putBE(v, 8);
            }
            return this;
        }

        Writer float64(double v) {
            put(0xcb);
            putBE(Double.doubleToRawLongBits(v), 8);
            return this;
        }

        Writer string(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            if (b.length < 32) {
                put(0xa0 | b.length);
            } else if (b.length < 256) {
                put(0xd9);
                put(b.length);
            } else if (b.length < 65536) {
                put(0xda);
                putBE(b.length, 2);
            } else {
                put(0xdb);
                putBE(b.length, 4);
            }
            raw(b);
            return this;
        }

        Writer binary(byte[] b) {
            if (b.length < 256) {
                put(0xc4);
                put(b.length);
            } else if (b.length < 65536) {
                put(0xc5);
                putBE(b.length, 2);
            } else {
                put(0xc6);
                putBE(b.length, 4);
            }
            raw(b);
            return this;
        }

        private void raw(byte[] b) {
            ensure(b.length);
            System.arraycopy(b, 0, buf, len, b.length);
            len += b.length;
        }
    }

    /** The kinds of value {@link Reader#peek()} tells apart. */
    enum Kind { NIL, BOOLEAN, INTEGER, FLOAT, STRING, BINARY, ARRAY, MAP }

    /**
     * Reads values from a byte array, checking every length against what is left; strings and binaries can be read in
     * place ({@link #stringBytes}, {@link #binaryBytes}), so reading allocates nothing unless a {@link String} or a
     * copy is asked for. Not thread-safe; {@link #reset} reuses it for the next array.
     */
    static final class Reader {
        private byte[] buf;
        private int pos;
        private int spanStart;

        Reader(byte[] buf) {
            this.buf = buf;
        }

        /** Reads {@code next} from its start on. */
        Reader reset(byte[] next) {
            buf = next;
            pos = 0;
            return this;
        }

        /** The array being read, where {@link #spanStart()} points. */
        byte[] buffer() {
            return buf;
        }

        /** Where the bytes of the last string or binary read in place begin in {@link #buffer()}. */
        int spanStart() {
            return spanStart;
        }

        boolean atEnd() {
            return pos == buf.length;
        }

        private int u8() throws MalformedEventException {
            need(1);
            return buf[pos++] & 0xff;
        }

        private long be(int bytes) throws MalformedEventException {
            need(bytes);
            long v = 0;
            for (int i = 0; i < bytes; i++) {
                v = (v << 8) | (buf[pos++] & 0xff);
            }
            return v;
        }

        private void need(long n) throws MalformedEventException {
            if (n < 0 || pos + n > buf.length) {
                throw new MalformedEventException("truncated: need " + n + " bytes at offset " + pos + " of " + buf.length);
            }
        }

        Kind peek() throws MalformedEventException {
            need(1);
            int b = buf[pos] & 0xff;
            if (b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3)) {
                return Kind.INTEGER;
            }
            if (b >= 0x80 && b <= 0x8f || b == 0xde || b == 0xdf) {
                return Kind.MAP;
            }
            if (b >= 0x90 && b <= 0x9f || b == 0xdc || b == 0xdd) {
                return Kind.ARRAY;
            }
            if (b >= 0xa0 && b <= 0xbf || b >= 0xd9 && b <= 0xdb) {
                return Kind.STRING;
            }
            return switch (b) {
                case 0xc0 -> Kind.NIL;
                case 0xc2, 0xc3 -> Kind.BOOLEAN;
                case 0xc4, 0xc5, 0xc6 -> Kind.BINARY;
                case 0xca, 0xcb -> Kind.FLOAT;
                default -> throw new MalformedEventException("unsupported msgpack type 0x" + Integer.toHexString(b)
                        + " at offset " + pos);
            };
        }

        /** Consumes a nil and returns true, or returns false and consumes nothing. */
        boolean tryNil() throws MalformedEventException {
            if (peek() == Kind.NIL) {
                pos++;
                return true;
            }
            return false;
        }

        int arrayHeader() throws MalformedEventException {
            int b = u8();
            long n;
            if (b >= 0x90 && b <= 0x9f) {
                n = b & 0x0f;
            } else if (b == 0xdc) {
                n = be(2);
            } else if (b == 0xdd) {
                n = be(4);
            } else {
                throw new MalformedEventException("expected an array at offset " + (pos - 1) + ", found 0x"
                        + Integer.toHexString(b));
            }
            need(n); // every element takes at least one byte
            return (int) n;
        }

        long integer() throws MalformedEventException {
            int b = u8();
            if (b <= 0x7f) {
                return b;
            }
            if (b >= 0xe0) {
                return (byte) b;
            }
            return switch (b) {
                case 0xcc -> be(1);
                case 0xcd -> be(2);
                case 0xce -> be(4);
                case 0xcf -> be(8);
                case 0xd0 -> (byte) be(1);
                case 0xd1 -> (short) be(2);
                case 0xd2 -> (int) be(4);
                case 0xd3 -> be(8);
                default -> throw new MalformedEventException("expected an integer at offset " + (pos - 1) + ", found 0x"
                        + Integer.toHexString(b));
            };
        }

        double number() throws MalformedEventException {
            Kind k = peek();
            if (k == Kind.INTEGER) {
                return integer();
            }
            int b = u8();
            if (b == 0xca) {
                return Float.intBitsToFloat((int) be(4));
            }
            if (b == 0xcb) {
                return Double.longBitsToDouble(be(8));
            }
            throw new MalformedEventException("expected a number at offset " + (pos - 1));
        }

        String string() throws MalformedEventException {
            int n = stringBytes();
            return new String(buf, spanStart, n, StandardCharsets.UTF_8);
        }

        /** Reads a string in place: returns its length in bytes, which start at {@link #spanStart()}. */
        int stringBytes() throws MalformedEventException {
            int b = u8();
            long n;
            if (b >= 0xa0 && b <= 0xbf) {
                n = b & 0x1f;
            } else if (b == 0xd9) {
                n = be(1);
            } else if (b == 0xda) {
                n = be(2);
            } else if (b == 0xdb) {
                n = be(4);
            } else {
                throw new MalformedEventException("expected a string at offset " + (pos - 1) + ", found 0x"
                        + Integer.toHexString(b));
            }
            return span(n);
        }

        /** Whether the string just read in place ({@link #stringBytes}, {@code n} bytes) is {@code ascii}'s bytes. */
        boolean spanIs(int n, byte[] ascii) {
            return Arrays.equals(buf, spanStart, spanStart + n, ascii, 0, ascii.length);
        }

        byte[] binary() throws MalformedEventException {
            int n = binaryBytes();
            return Arrays.copyOfRange(buf, spanStart, spanStart + n);
        }

        /** Reads a binary in place: returns its length in bytes, which start at {@link #spanStart()}. */
        int binaryBytes() throws MalformedEventException {
            int b = u8();
            long n = switch (b) {
                case 0xc4 -> be(1);
                case 0xc5 -> be(2);
                case 0xc6 -> be(4);
                default -> throw new MalformedEventException("expected binary at offset " + (pos - 1) + ", found 0x"
                        + Integer.toHexString(b));
            };
            return span(n);
        }

        private int span(long n) throws MalformedEventException {
            need(n);
            spanStart = pos;
            pos += (int) n;
            return (int) n;
        }

        /** Skips one value of any supported kind, nested ones included (at most 32 deep). */
        void skip() throws MalformedEventException {
            skip(0);
        }

        /** Reads the header of a map and returns its entry count. */
        int mapHeader() throws MalformedEventException {
            int b = u8();
            long n;
            if (b >= 0x80 && b <= 0x8f) {
                n = b & 0x0f;
            } else if (b == 0xde) {
                n = be(2);
            } else if (b == 0xdf) {
                n = be(4);
            } else {
                throw new MalformedEventException("expected a map at offset " + (pos - 1) + ", found 0x"
                        + Integer.toHexString(b));
            }
            need(2 * n);
            return (int) n;
        }

        private void skip(int depth) throws MalformedEventException {
            if (depth > 32) {
                throw new MalformedEventException("values nested over 32 deep at offset " + pos);
            }
            switch (peek()) {
                case NIL, BOOLEAN -> pos++;
                case INTEGER -> integer();
                case FLOAT -> number();
                case STRING -> stringBytes();
                case BINARY -> binaryBytes();
                case ARRAY -> {
                    for (int i = arrayHeader(); i > 0; i--) {
                        skip(depth + 1);
                    }
                }
                case MAP -> {
                    for (int i = 2 * mapHeader(); i > 0; i--) {
                        skip(depth + 1);
                    }
                }
            }
        }
    }
}
