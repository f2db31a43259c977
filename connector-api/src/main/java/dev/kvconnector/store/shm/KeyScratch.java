package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * One thread's reusable key buffer: a key is encoded to UTF-8 here, without allocating, then hashed and compared
 * against keys in the mapped file. One per thread, created on the thread's first call.
 */
final class KeyScratch {
    private static final ThreadLocal<KeyScratch> CURRENT = ThreadLocal.withInitial(KeyScratch::new);

    /** On the heap: a virtual thread per request then costs one small array, not an arena and its cleaner. */
    final MemorySegment bytes = MemorySegment.ofArray(new byte[ShmLayout.MAX_KEY_BYTES + 8]);
    /** Encoded length in bytes, or -1 when the key is longer than {@link ShmLayout#MAX_KEY_BYTES}. */
    int length;
    long hash;
    /** Offset of the lease record this thread holds during a read, or -1. */
    long leaseOffset = -1;
    /** The state word of the entry the last hit found, as the probe read it. */
    long stateWord;

    /**
     * {@code key} encoded into this thread's scratch.
     *
     * @throws KVException INVALID_ARGUMENT for a null key or one longer than {@link ShmLayout#MAX_KEY_BYTES}
     */
    static KeyScratch of(String key, String op, String uri) {
        if (key == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the key is null").store(uri).operation(op).build();
        }
        KeyScratch k = encode(key);
        if (k.length < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the key is longer than " + ShmLayout.MAX_KEY_BYTES
                    + " UTF-8 bytes").store(uri).operation(op).key(key)
                    .hint("shorten the key, or hash its tail (a key scheme can do that)").build();
        }
        return k;
    }

    static KeyScratch encode(String key) {
        KeyScratch s = CURRENT.get();
        s.length = s.utf8(key);
        if (s.length >= 0) {
            s.hash = s.hash();
        }
        return s;
    }

    /** UTF-8 as {@code String.getBytes(UTF_8)} writes it (unpaired surrogates become '?'). */
    private int utf8(String key) {
        int n = key.length();
        if (n > ShmLayout.MAX_KEY_BYTES) {
            return -1;
        }
        int p = 0;
        for (int i = 0; i < n; i++) {
            char c = key.charAt(i);
            if (c < 0x80) {
                if (p + 1 > ShmLayout.MAX_KEY_BYTES) {
                    return -1;
                }
                put(p++, c);
            } else if (c < 0x800) {
                if (p + 2 > ShmLayout.MAX_KEY_BYTES) {
                    return -1;
                }
                put(p++, 0xC0 | c >> 6);
                put(p++, 0x80 | c & 0x3F);
            } else if (Character.isSurrogate(c)) {
                if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(key.charAt(i + 1))) {
                    int cp = Character.toCodePoint(c, key.charAt(++i));
                    if (p + 4 > ShmLayout.MAX_KEY_BYTES) {
                        return -1;
                    }
                    put(p++, 0xF0 | cp >> 18);
                    put(p++, 0x80 | cp >> 12 & 0x3F);
                    put(p++, 0x80 | cp >> 6 & 0x3F);
                    put(p++, 0x80 | cp & 0x3F);
                } else {
                    if (p + 1 > ShmLayout.MAX_KEY_BYTES) {
                        return -1;
                    }
                    put(p++, '?');
                }
            } else {
                if (p + 3 > ShmLayout.MAX_KEY_BYTES) {
                    return -1;
                }
                put(p++, 0xE0 | c >> 12);
                put(p++, 0x80 | c >> 6 & 0x3F);
                put(p++, 0x80 | c & 0x3F);
            }
        }
        return p;
    }

    private void put(int p, int b) {
        bytes.set(ValueLayout.JAVA_BYTE, p, (byte) b);
    }

    /** FNV-1a over the bytes, then the murmur3 finalizer so that both halves of the hash are well mixed. */
    private long hash() {
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < length; i++) {
            h ^= bytes.get(ValueLayout.JAVA_BYTE, i) & 0xFF;
            h *= 0x100000001b3L;
        }
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return h;
    }
}
