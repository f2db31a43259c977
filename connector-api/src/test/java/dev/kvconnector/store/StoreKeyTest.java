package dev.kvconnector.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.sun.management.ThreadMXBean;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class StoreKeyTest {
    private static final ThreadMXBean THREADS = (ThreadMXBean) ManagementFactory.getThreadMXBean();

    @Test
    void aKeyHoldsTheUtf8BytesOfItsStringForAnyText() {
        SplittableRandom r = new SplittableRandom(7);
        StoreKey key = new StoreKey();
        for (int round = 0; round < 5_000; round++) {
            StringBuilder b = new StringBuilder();
            int n = r.nextInt(0, 300);
            for (int i = 0; i < n; i++) {
                b.append((char) switch (r.nextInt(5)) {
                    case 0 -> r.nextInt(0x80);
                    case 1 -> r.nextInt(0x80, 0x800);
                    case 2 -> r.nextInt(0x800, 0x10000);
                    default -> r.nextInt(0x61, 0x7b);
                });
            }
            String s = b.toString();
            byte[] expected = s.getBytes(StandardCharsets.UTF_8);
            key.set(s);
            byte[] actual = new byte[key.length()];
            key.copyTo(actual, 0);
            assertArrayEquals(expected, actual, s);
            assertEquals(new String(expected, StandardCharsets.UTF_8), key.toString());
        }
    }

    @Test
    void aKeyGrowsForTheAsciiAfterWideCharactersThatFilledItsRoom() {
        for (int wide = 0; wide < 200; wide++) {
            String text = "é".repeat(wide) + "k".repeat(wide % 7 + 1);
            StoreKey key = StoreKey.of(text);
            assertEquals(text, key.toString());
            assertEquals(text, new StoreKey().append("x").set(text).toString());
        }
    }

    @Test
    void aSurrogatePairIsOneFourByteCharacterAndALoneSurrogateIsAQuestionMark() {
        String text = "a\uD83D\uDE00b\uD800c\uDC00";
        StoreKey key = StoreKey.of(text);
        byte[] actual = new byte[key.length()];
        key.copyTo(actual, 0);
        assertArrayEquals(text.getBytes(StandardCharsets.UTF_8), actual);
        assertEquals(1 + 4 + 1 + 1 + 1 + 1, key.length());
    }

    @Test
    void appendedPartsMakeTheSameKeyAsTheirConcatenation() {
        byte[] hash = new byte[32];
        new SplittableRandom(3).nextBytes(hash);
        for (int layer : new int[] {0, 7, 31, 1_000_000, -5, Integer.MIN_VALUE, Integer.MAX_VALUE}) {
            StoreKey key = new StoreKey().append("kvc1:{").appendHex(hash, 0, 32).append("}:L").append(layer);
            String expected = "kvc1:{" + HexFormat.of().formatHex(hash) + "}:L" + layer;
            assertEquals(StoreKey.of(expected), key);
            assertEquals(StoreKey.of(expected).hashCode(), key.hashCode());
            assertEquals(expected, key.toString());
        }
        assertEquals("x:H", new StoreKey().append("x").appendByte(':').appendByte('H').toString());
        assertThrows(IllegalArgumentException.class, () -> new StoreKey().appendByte('\u00e9'));
    }

    @Test
    void keysAreEqualByTheirBytesAndARefilledKeyHashesAnew() {
        StoreKey a = StoreKey.of("kvc1:{ab}:L1");
        StoreKey b = new StoreKey().set(a);
        assertEquals(a, b);
        assertEquals(a.hashCode(), b.hashCode());
        int before = b.hashCode();
        b.set("kvc1:{ab}:L2");
        assertNotEquals(a, b);
        assertNotEquals(before, b.hashCode());
        assertEquals(StoreKey.of("kvc1:{ab}:L2").hashCode(), b.hashCode());
        assertNotEquals(StoreKey.of("ab"), StoreKey.of("ab\u0000"));
        assertNotEquals(StoreKey.of("ab"), "ab");
        StoreKey self = StoreKey.of("kvc1:{ab}:M");
        assertEquals("kvc1:{ab}:M", self.set(self).toString());
    }

    @Test
    void aKeyCopiesItsBytesIntoASegment() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dst = arena.allocate(16);
            StoreKey.of("héllo").copyTo(dst, 3);
            byte[] out = dst.asSlice(3, 6).toArray(ValueLayout.JAVA_BYTE);
            assertArrayEquals("héllo".getBytes(StandardCharsets.UTF_8), out);
            assertThrows(IndexOutOfBoundsException.class, () -> StoreKey.of("ab").byteAt(2));
            assertEquals('b', StoreKey.of("ab").byteAt(1));
        }
    }

    @Test
    void refillingAKeyNoLongerThanBeforeAllocatesNothing() {
        StoreKey key = new StoreKey();
        byte[] hash = new byte[32];
        String prefix = "kvc1:{";
        long allocated = 0;
        for (int round = 0; round < 3; round++) {
            long before = THREADS.getCurrentThreadAllocatedBytes();
            int sum = 0;
            for (int i = 0; i < 20_000; i++) {
                hash[0] = (byte) i;
                key.clear().append(prefix).appendHex(hash, 0, 32).append("}:L").append(i & 31);
                sum += key.hashCode();
            }
            allocated = THREADS.getCurrentThreadAllocatedBytes() - before;
            assertNotEquals(0, sum | 1);
        }
        assertEquals(0, allocated, "bytes allocated by 20,000 refills of a warm key");
    }
}
