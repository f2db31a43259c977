package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvconnector.error.KVException;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class ByteTokenizerTest {
    @Test
    void tokensAreTheUtf8Bytes() {
        assertArrayEquals(new int[] {'h', 'i', 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80}, ByteTokenizer.encode("hi\u00e9\uD83D\uDE00"));
        assertEquals("hi\u00e9\uD83D\uDE00", ByteTokenizer.decode(ByteTokenizer.encode("hi\u00e9\uD83D\uDE00")));
    }

    @Test
    void idsOutsideAByteAreRefused() {
        assertThrows(KVException.class, () -> ByteTokenizer.decode(new int[] {256}));
        assertThrows(KVException.class, () -> new ByteTokenizer.Stream().next(-1));
    }

    @Test
    void streamHoldsBackAnUnfinishedSequence() {
        ByteTokenizer.Stream s = new ByteTokenizer.Stream();
        assertEquals("", s.next(0xE2));
        assertEquals("", s.next(0x82));
        assertEquals("\u20ac", s.next(0xAC));
        assertEquals("", s.next(0xE2));
        assertEquals("\uFFFD", s.finish());
    }

    @Property(tries = 300)
    void streamedTextEqualsWholeDecodeForAnyBytes(@ForAll @Size(max = 40) List<@IntRange(min = 0, max = 255) Integer> ids) {
        int[] tokens = ids.stream().mapToInt(Integer::intValue).toArray();
        ByteTokenizer.Stream s = new ByteTokenizer.Stream();
        StringBuilder text = new StringBuilder();
        for (int t : tokens) {
            text.append(s.next(t));
        }
        text.append(s.finish());
        assertEquals(ByteTokenizer.decode(tokens), text.toString());
    }

    @Property(tries = 100)
    void decodeOfEncodeGivesTheTextBack(@ForAll String text) {
        // Lone surrogates have no UTF-8 form; String.getBytes turns them into '?', and so does the tokenizer.
        String expected = new String(text.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
        assertEquals(expected, ByteTokenizer.decode(ByteTokenizer.encode(text)));
    }
}
