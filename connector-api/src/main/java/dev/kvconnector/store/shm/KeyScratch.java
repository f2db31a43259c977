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
    /** Each thread's key that a {@code String} is encoded into before its bytes are taken. */
    private static final ThreadLocal<StoreKey> TEXT = ThreadLocal.withInitial(StoreKey::new);

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
        return CURRENT.get().fill(key);
    }

    /**
     * {@code key} encoded into this thread's scratch as {@code key.getBytes(UTF_8)} would (through the thread's
     * {@link StoreKey}, the one encoder of keys); its length is -1 when it is longer than
     * {@link ShmLayout#MAX_KEY_BYTES}.
     */
    static KeyScratch encode(String key) {
        KeyScratch s = CURRENT.get();
        // A key of more characters than that has more bytes too: refused before it is encoded.
        if (key.length() > ShmLayout.MAX_KEY_BYTES) {
            s.length = -1;
            return s;
        }
        StoreKey text = TEXT.get().set(key);
        if (text.length() > ShmLayout.MAX_KEY_BYTES) {
            s.length = -1;
            return s;
        }
        return s.fill(text);
    }

    /** Makes this scratch hold {@code key}'s bytes, at most {@link ShmLayout#MAX_KEY_BYTES}, and their hash. */
    private KeyScratch fill(StoreKey key) {
        key.copyTo(array, 0);
        length = key.length();
        hash = hash();
        return this;
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
