package dev.kvconnector.store;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A store key as the UTF-8 bytes of its text, in a buffer that its owner refills key after key: the allocation-free
 * form of a {@code String} key for the {@link KVStore} methods that take one. The key {@code k} and the string
 * {@code s} name the same object when {@code k}'s bytes are {@code s.getBytes(UTF_8)}.
 *
 * <p>A store reads a key only during the call it is passed to and keeps no reference to it, so the caller may refill
 * it at once. Filling one allocates only while the buffer grows past its largest key so far. Two keys are
 * {@link #equals equal} when their bytes are; {@link #hashCode} depends on the bytes alone. Not thread-safe: one
 * thread fills and passes a key at a time.
 */
public final class StoreKey {
    private static final byte[] HEX_DIGITS = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

    private byte[] bytes;
    private int length;
    private int hash;

    /** An empty key with room for 96 bytes before it grows. */
    public StoreKey() {
        this.bytes = new byte[96];
    }

    /** A new key holding {@code key}. */
    public static StoreKey of(String key) {
        return new StoreKey().set(key);
    }

    /** Empties the key, to be filled by the {@code append} methods. */
    public StoreKey clear() {
        length = 0;
        hash = 0;
        return this;
    }

    /** Makes this key {@code key}, encoded as {@code key.getBytes(UTF_8)} would (a lone surrogate becomes '?'). */
    public StoreKey set(String key) {
        return clear().append(key);
    }

    /** Makes this key a copy of {@code other}. */
    public StoreKey set(StoreKey other) {
        if (other == this) {
            return this;
        }
        clear();
        ensure(other.length);
        System.arraycopy(other.bytes, 0, bytes, 0, other.length);
        length = other.length;
        return this;
    }

    /** Appends {@code text} in UTF-8. */
    public StoreKey append(String text) {
        int n = text.length();
        ensure(length + n);
        for (int i = 0; i < n; i++) {
            char c = text.charAt(i);
            if (c < 0x80) {
                if (length == bytes.length) {
                    ensure(length + n - i);
                }
                bytes[length++] = (byte) c;
            } else {
                i = appendWide(text, i, c);
            }
        }
        hash = 0;
        return this;
    }

    /** Appends the decimal digits of {@code value} (with a '-' when negative). */
    public StoreKey append(int value) {
        if (value < 0) {
            appendByte('-');
            if (value == Integer.MIN_VALUE) {
                return append("2147483648");
            }
            value = -value;
        }
        int digits = 1;
        for (int v = value; v >= 10; v /= 10) {
            digits++;
        }
        ensure(length + digits);
        for (int i = length + digits - 1; i >= length; i--) {
            bytes[i] = (byte) ('0' + value % 10);
            value /= 10;
        }
        length += digits;
        hash = 0;
        return this;
    }

    /** Appends {@code count} bytes of {@code src} from {@code offset} as lower-case hex, two digits a byte. */
    public StoreKey appendHex(byte[] src, int offset, int count) {
        ensure(length + 2 * count);
        for (int i = offset; i < offset + count; i++) {
            bytes[length++] = HEX_DIGITS[(src[i] >> 4) & 0xF];
            bytes[length++] = HEX_DIGITS[src[i] & 0xF];
        }
        hash = 0;
        return this;
    }

    /** Appends one ASCII character. */
    public StoreKey appendByte(char ascii) {
        if (ascii >= 0x80) {
            throw new IllegalArgumentException("not ASCII: U+" + Integer.toHexString(ascii));
        }
        ensure(length + 1);
        bytes[length++] = (byte) ascii;
        hash = 0;
        return this;
    }

    /** Bytes in the key. */
    public int length() {
        return length;
    }

    /** The key's byte at {@code index}, from 0 to {@link #length()} - 1. */
    public byte byteAt(int index) {
        if (index < 0 || index >= length) {
            throw new IndexOutOfBoundsException("byte " + index + " of a " + length + "-byte key");
        }
        return bytes[index];
    }

    /** Copies the key's bytes into {@code dst} at {@code offset}. */
    public void copyTo(MemorySegment dst, long offset) {
        MemorySegment.copy(bytes, 0, dst, ValueLayout.JAVA_BYTE, offset, length);
    }

    /** Copies the key's bytes into {@code dst} at {@code offset}. */
    public void copyTo(byte[] dst, int offset) {
        System.arraycopy(bytes, 0, dst, offset, length);
    }

    @Override
    public boolean equals(Object o) {
        return this == o || o instanceof StoreKey k && k.length == length
                && Arrays.equals(bytes, 0, length, k.bytes, 0, length);
    }

    @Override
    public int hashCode() {
        int h = hash;
        if (h == 0 && length > 0) {
            h = 1;
            for (int i = 0; i < length; i++) {
                h = 31 * h + bytes[i];
            }
            hash = h;
        }
        return h;
    }

    /** The key's text (a new string). */
    @Override
    public String toString() {
        return new String(bytes, 0, length, StandardCharsets.UTF_8);
    }

    private int appendWide(String text, int i, char c) {
        if (c < 0x800) {
            ensure(length + 2);
            bytes[length++] = (byte) (0xC0 | c >> 6);
            bytes[length++] = (byte) (0x80 | c & 0x3F);
        } else if (Character.isSurrogate(c)) {
            if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
                int cp = Character.toCodePoint(c, text.charAt(++i));
                ensure(length + 4);
                bytes[length++] = (byte) (0xF0 | cp >> 18);
                bytes[length++] = (byte) (0x80 | cp >> 12 & 0x3F);
                bytes[length++] = (byte) (0x80 | cp >> 6 & 0x3F);
                bytes[length++] = (byte) (0x80 | cp & 0x3F);
            } else {
                ensure(length + 1);
                bytes[length++] = '?';
            }
        } else {
            ensure(length + 3);
            bytes[length++] = (byte) (0xE0 | c >> 12);
            bytes[length++] = (byte) (0x80 | c >> 6 & 0x3F);
            bytes[length++] = (byte) (0x80 | c & 0x3F);
        }
        return i;
    }

    /** Grows the buffer to at least {@code size} bytes, keeping the key; the only allocation a key makes. */
    private void ensure(int size) {
        if (size > bytes.length) {
            bytes = Arrays.copyOf(bytes, Math.max(size, bytes.length * 2));
        }
    }
}
