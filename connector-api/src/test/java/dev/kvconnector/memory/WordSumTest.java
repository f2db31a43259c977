package dev.kvconnector.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class WordSumTest {

    /** The definition, word by word: little-endian 32-bit words, zero-padded; even + 3 * odd, modulo 2^32. */
    static int definition(MemorySegment s, long offset, long bytes) {
        int even = 0;
        int odd = 0;
        for (long w = 0; w * 4 < bytes; w++) {
            int word = 0;
            for (int b = 0; b < 4 && w * 4 + b < bytes; b++) {
                word |= (s.get(ValueLayout.JAVA_BYTE, offset + w * 4 + b) & 0xFF) << (8 * b);
            }
            if (w % 2 == 0) {
                even += word;
            } else {
                odd += word;
            }
        }
        return even + 3 * odd;
    }

    @Test
    void knownValues() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(12);
            for (int i = 0; i < 12; i++) {
                s.set(ValueLayout.JAVA_BYTE, i, (byte) (i + 1));
            }
            // words 0x04030201 (even), 0x08070605 (odd), 0x0c0b0a09 (even)
            assertEquals(0x04030201 + 0x0c0b0a09 + 3 * 0x08070605, WordSum.of(s, 0, 12));
            // 5 bytes: 0x04030201 and the zero-padded 0x00000005
            assertEquals(0x04030201 + 3 * 0x05, WordSum.of(s, 0, 5));
            assertEquals(0, WordSum.of(s, 3, 0));
            s.fill((byte) 0xFF);
            // (2 * 0xFFFFFFFF + 3 * 0xFFFFFFFF) mod 2^32 = -5
            assertEquals(-5, WordSum.of(s, 0, 12));
        }
    }

    @Test
    void equalsItsDefinitionForEveryLengthAndStart() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = Segments.random(a, 600, 11);
            for (int start = 0; start < 9; start++) {
                for (int len = 0; len <= 520; len++) {
                    assertEquals(definition(s, start, len), WordSum.of(s, start, len), "start " + start + " len " + len);
                }
            }
        }
    }

    @Test
    void anySplitOfThePayloadGivesTheSameSum() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = Segments.random(a, 257, 12);
            int whole = WordSum.of(s, 0, 257);
            WordSum sum = new WordSum();
            for (int first = 0; first <= 257; first++) {
                for (int second = first; second <= 257; second += 7) {
                    sum.reset();
                    sum.update(s, 0, first);
                    sum.update(s, first, second - first);
                    sum.update(s, second, 257 - second);
                    assertEquals(whole, sum.value(), "split at " + first + " and " + second);
                    assertEquals(257, sum.position());
                }
            }
        }
    }

    @Test
    void everyFlippedBitAndEveryDamagedByteChangesTheSum() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = Segments.random(a, 203, 13);
            int good = WordSum.of(s, 0, s.byteSize());
            for (long at = 0; at < s.byteSize(); at++) {
                byte original = s.get(ValueLayout.JAVA_BYTE, at);
                for (int value = 0; value < 256; value++) {
                    if ((byte) value == original) {
                        continue;
                    }
                    s.set(ValueLayout.JAVA_BYTE, at, (byte) value);
                    assertNotEquals(good, WordSum.of(s, 0, s.byteSize()), "byte " + at + " set to " + value);
                }
                s.set(ValueLayout.JAVA_BYTE, at, original);
            }
            assertEquals(good, WordSum.of(s, 0, s.byteSize()));
        }
    }

    @Test
    void aDamagedWordIsCaughtWhateverTheDamage() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = Segments.random(a, 64, 14);
            int good = WordSum.of(s, 0, 64);
            java.util.SplittableRandom r = new java.util.SplittableRandom(15);
            for (int i = 0; i < 20_000; i++) {
                long at = 4L * r.nextInt(16);
                int original = s.get(ValueLayout.JAVA_INT_UNALIGNED, at);
                int damaged = r.nextInt();
                if (damaged == original) {
                    continue;
                }
                s.set(ValueLayout.JAVA_INT_UNALIGNED, at, damaged);
                assertNotEquals(good, WordSum.of(s, 0, 64), "word at " + at);
                s.set(ValueLayout.JAVA_INT_UNALIGNED, at, original);
            }
        }
    }

    @Test
    void aRangeOutsideTheSegmentIsRefusedAndAddsNothing() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = Segments.random(a, 100, 16);
            WordSum sum = new WordSum();
            assertThrows(IndexOutOfBoundsException.class, () -> sum.update(s, 50, 51));
            assertEquals(0, sum.position());
            assertEquals(0, sum.value());
        }
    }
}
