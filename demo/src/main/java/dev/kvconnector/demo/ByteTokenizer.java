package dev.kvconnector.demo;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * The demo's tokenizer: a token is one byte of the text's UTF-8 encoding, so ids are 0..255. Decoding replaces
 * malformed UTF-8 (a random model emits plenty) with U+FFFD, as {@link String#String(byte[], java.nio.charset.Charset)}
 * does; {@link Stream} decodes token by token to the same text.
 */
public final class ByteTokenizer {
    private ByteTokenizer() {
    }

    /** The UTF-8 bytes of {@code text} as token ids 0..255. */
    public static int[] encode(String text) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        int[] ids = new int[bytes.length];
        for (int i = 0; i < bytes.length; i++) {
            ids[i] = bytes[i] & 0xFF;
        }
        return ids;
    }

    /** The text of {@code ids}; an id outside 0..255 is an {@code INVALID_ARGUMENT} error. */
    public static String decode(int[] ids) {
        byte[] bytes = new byte[ids.length];
        for (int i = 0; i < ids.length; i++) {
            bytes[i] = checkedByte(ids[i]);
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static byte checkedByte(int id) {
        if (id < 0 || id > 255) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "token id " + id + " is not a byte (0..255)").build();
        }
        return (byte) id;
    }

    /**
     * Decodes a token stream incrementally: {@link #next} returns the text that the tokens so far complete, holding
     * back the bytes of an unfinished UTF-8 sequence; {@link #finish} flushes them. The concatenation equals
     * {@link #decode} of all the tokens. Not thread-safe.
     */
    public static final class Stream {
        private final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPLACE).onUnmappableCharacter(CodingErrorAction.REPLACE);
        private final ByteBuffer pending = ByteBuffer.allocate(8);
        private final CharBuffer out = CharBuffer.allocate(16);

        /** The text completed by token {@code id}, possibly empty. */
        public String next(int id) {
            pending.put(checkedByte(id));
            return drain(false);
        }

        /** The text of any bytes still held back (replacement characters for an unfinished sequence). */
        public String finish() {
            String s = drain(true);
            out.clear();
            decoder.flush(out);
            out.flip();
            return s + out;
        }

        private String drain(boolean end) {
            pending.flip();
            out.clear();
            decoder.decode(pending, out, end);
            pending.compact();
            out.flip();
            return out.toString();
        }
    }
}
