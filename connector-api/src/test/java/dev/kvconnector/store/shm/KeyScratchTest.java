package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreKey;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * {@link KeyScratch}'s contract: a key's bytes are exactly its UTF-8 encoding (what other processes compare in the
 * file), its hash is the file format's (FNV-1a then the murmur3 finalizer, the same in every process and version),
 * keys over {@value ShmLayout#MAX_KEY_BYTES} bytes are refused naming the limit, and each thread has its own scratch.
 */
class KeyScratchTest {

    private static byte[] encoded(KeyScratch k) {
        return k.bytes.asSlice(0, k.length).toArray(ValueLayout.JAVA_BYTE);
    }

    /** Keys of one- to four-byte characters, unpaired surrogates among them, up to the limit and one byte over. */
    private static List<String> keys() {
        SplittableRandom rnd = new SplittableRandom(17);
        List<String> keys = new ArrayList<>(List.of("", "k", "naïve/κλειδί/鍵", "😀x", "a\uD800b", "\uDC00",
                "end\uD83D", "é".repeat(125), "€".repeat(83), "k".repeat(251), "é".repeat(125) + "k",
                "😀".repeat(62) + "abc"));
        for (int i = 0; i < 2000; i++) {
            StringBuilder sb = new StringBuilder();
            for (int n = rnd.nextInt(60); n > 0; n--) {
                sb.append((char) switch (rnd.nextInt(4)) {
                    case 0 -> rnd.nextInt(0x80);
                    case 1 -> 0x80 + rnd.nextInt(0x780);
                    case 2 -> 0x800 + rnd.nextInt(0xF800);
                    default -> 0xD800 + rnd.nextInt(0x800);
                });
            }
            keys.add(sb.toString());
        }
        return keys;
    }

    @Test
    void aKeyIsEncodedAsStringGetBytesEncodesItUnpairedSurrogatesIncluded() {
        for (String key : keys()) {
            byte[] want = key.getBytes(StandardCharsets.UTF_8);
            KeyScratch k = KeyScratch.encode(key);
            if (want.length > ShmLayout.MAX_KEY_BYTES) {
                assertEquals(-1, k.length, key);
                continue;
            }
            assertArrayEquals(want, encoded(k), key);
            assertEquals(reference(want), k.hash, key);
        }
    }

    @Test
    void aStoreKeysBytesAreTakenAsTheyAreAndHashedAsItsStringsEncoding() {
        StoreKey bytes = new StoreKey();
        for (String key : keys()) {
            bytes.set(key);
            byte[] want = key.getBytes(StandardCharsets.UTF_8);
            if (want.length > ShmLayout.MAX_KEY_BYTES) {
                KVException e = assertThrows(KVException.class, () -> KeyScratch.of(bytes, "put", "shm:/t"), key);
                assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
                assertTrue(e.getMessage().contains("longer than 250 UTF-8 bytes"), e.getMessage());
                assertEquals(KVException.shortenKey(bytes.toString()), e.key(), "the error names the key");
                continue;
            }
            KeyScratch k = KeyScratch.of(bytes, "put", "shm:/t");
            assertArrayEquals(want, encoded(k), key);
            assertEquals(reference(want), k.hash, key);
            assertEquals(bytes.toString(), k.text(), "an error names the key from its bytes");
        }
        KVException none = assertThrows(KVException.class, () -> KeyScratch.of((StoreKey) null, "get", "shm:/t"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, none.code());
        assertTrue(none.getMessage().contains("the key is null"), none.getMessage());
    }

    @Test
    void aHandlesCopyKeepsTheKeyWhileTheThreadsScratchMovesOn() {
        KeyScratch held = new KeyScratch();
        held.copyFrom(KeyScratch.encode("claimed/κλειδί"));
        KeyScratch.encode("the next call's key");
        assertEquals("claimed/κλειδί", held.text());
        assertEquals(KeyScratch.encode("claimed/κλειδί").hash, held.hash);
        assertEquals(-1, held.leaseOffset);
    }

    @Test
    void theHashIsTheFileFormatsAndTellsKeysApart() {
        assertEquals(0x2BA437A975BF0065L, KeyScratch.encode("k").hash, "a file written by another version");
        assertEquals(0x87DA16FC798280B8L, KeyScratch.encode("layer/0/κλειδί").hash);
        long a = KeyScratch.encode("layer-1").hash;
        long b = KeyScratch.encode("layer-2").hash;
        assertNotEquals(a, b);
        assertNotEquals((int) (a >>> 32), (int) (b >>> 32), "the index's tag, the high half, differs too");
    }

    @Test
    void keysOverTheLimitAreRefusedNamingItAndKeysAtItPass() {
        assertEquals(250, KeyScratch.of("k".repeat(250), "put", "shm:/t").length);
        assertEquals(250, KeyScratch.of("é".repeat(125), "put", "shm:/t").length);
        for (String tooLong : List.of("k".repeat(251), "é".repeat(125) + "k", "€".repeat(84),
                "😀".repeat(62) + "abc")) {
            KVException e = assertThrows(KVException.class, () -> KeyScratch.of(tooLong, "put", "shm:/t"));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("longer than 250 UTF-8 bytes") && e.getMessage().contains("put:")
                    && e.getMessage().contains("shm:/t"), e.getMessage());
        }
        KVException none = assertThrows(KVException.class, () -> KeyScratch.of((String) null, "get", "shm:/t"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, none.code());
        assertTrue(none.getMessage().contains("the key is null"), none.getMessage());
    }

    @Test
    void eachThreadHasOneScratchHoldingNoLeaseUntilAReadTakesOne() throws Exception {
        KeyScratch mine = KeyScratch.encode("a");
        assertSame(mine, KeyScratch.encode("b"), "one scratch per thread, reused");
        assertEquals(1, mine.length);
        KeyScratch other = CompletableFuture.supplyAsync(() -> KeyScratch.encode("a")).get();
        assertNotSame(mine, other);
        assertEquals(-1, other.leaseOffset);
    }

    /** FNV-1a over the bytes, then the murmur3 finalizer: the hash as the file format defines it. */
    private static long reference(byte[] bytes) {
        long h = 0xcbf29ce484222325L;
        for (byte b : bytes) {
            h ^= b & 0xFF;
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
