package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreKey;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/**
 * A key's UTF-8 bytes and hash, as they are compared against the keys in the mapped file. Each thread has one
 * reusable scratch, created on its first call, into which every call puts its key without allocating: a
 * {@code String} key is encoded, a {@link StoreKey}'s bytes are copied as they are, so that both forms of a key find
 * the same entry. A claim or a view handle keeps a copy of its key in a scratch of its own ({@link #copyFrom}).
 *
 * <p>A scratch also names its key in errors: the store's parts take it where they need the key only for a message,
 * and decode its bytes ({@link #text()}) only when they build one, so that a {@code StoreKey} call makes no string.
 */
final class KeyScratch {
    private static final ThreadLocal<KeyScratch> CURRENT = ThreadLocal.withInitial(KeyScratch::new);

    /** On the heap: a virtual thread per request then costs one small array, not an arena and its cleaner. */
    private final byte[] array = new byte[ShmLayout.MAX_KEY_BYTES + 8];
    /** The key's bytes, over {@link #array}. */
    final MemorySegment bytes = MemorySegment.ofArray(array);
    /** Encoded length in bytes, or -1 when the key is longer than {@link ShmLayout#MAX_KEY_BYTES}. */
    int length;
    long hash;
    /** Offset of the lease record this thread holds during a read, or -1; unused in a handle's copy. */
    long leaseOffset = -1;
    /** The state word of the entry the last hit found, as the probe read it; unused in a handle's copy. */
    long stateWord;

    /**
     * {@code key} encoded into this thread's scratch.
     *
     * @throws KVException INVALID_ARGUMENT for a null key or one longer than {@link ShmLayout#MAX_KEY_BYTES}
     */
    static KeyScratch of(String key, String op, String uri) {
        if (key == null) {
            throw nullKey(op, uri);
        }
        KeyScratch k = encode(key);
        if (k.length < 0) {
            throw tooLong(key, op, uri);
        }
        return k;
    }

    /**
     * {@code key}'s bytes copied into this thread's scratch, as they are (they are the UTF-8 bytes that
     * {@link #of(String, String, String)} encodes its string into), and hashed the same.
     *
     * @throws KVException INVALID_ARGUMENT for a null key or one longer than {@link ShmLayout#MAX_KEY_BYTES}, naming
     *     the key
     */
    static KeyScratch of(StoreKey key, String op, String uri) {
        if (key == null) {
            throw nullKey(op, uri);
        }
        if (key.length() > ShmLayout.MAX_KEY_BYTES) {
            throw tooLong(key.toString(), op, uri);
        }
        KeyScratch s = CURRENT.get();
        key.copyTo(s.array, 0);
        s.length = key.length();
        s.hash = s.hash();
        return s;
    }

    static KeyScratch encode(String key) {
        KeyScratch s = CURRENT.get();
        s.length = s.utf8(key);
        if (s.length >= 0) {
            s.hash = s.hash();
        }
        return s;
    }

    /** Makes this scratch hold {@code other}'s key: its bytes, length and hash. */
    void copyFrom(KeyScratch other) {
        System.arraycopy(other.array, 0, array, 0, other.length);
        length = other.length;
        hash = other.hash;
    }

    /** The key's text, decoded from its bytes into a new string: for an error's message, not for a call's path. */
    String text() {
        return new String(array, 0, length, StandardCharsets.UTF_8);
    }

    /** {@code key}'s {@link #text()}, or null for no key. */
    static String textOf(KeyScratch key) {
        return key == null ? null : key.text();
    }

    private static KVException nullKey(String op, String uri) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the key is null").store(uri).operation(op).build();
    }

    private static KVException tooLong(String key, String op, String uri) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the key is longer than " + ShmLayout.MAX_KEY_BYTES
                + " UTF-8 bytes").store(uri).operation(op).key(key)
                .hint("shorten the key, or hash its tail (a key scheme can do that)").build();
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
        array[p] = (byte) b;
    }

    /** FNV-1a over the bytes, then the murmur3 finalizer so that both halves of the hash are well mixed. */
    private long hash() {
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < length; i++) {
            h ^= array[i] & 0xFF;
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
