package dev.kvconnector.lmcache.protocol;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * The 150-byte key field: the key's UTF-8 bytes padded with spaces. The server strips surrounding whitespace, so
 * a key that is empty, starts or ends with whitespace, or is longer than 150 UTF-8 bytes would be changed on the
 * way: such keys are refused here, never cut (the Python server would silently cut a long one).
 */
public final class LmKeyField {
    private LmKeyField() {
    }

    /**
     * The key's length in UTF-8 bytes, after checking that the key survives the trip unchanged.
     *
     * @throws KVException {@link ErrorCode#INVALID_ARGUMENT} naming the byte count and the limit
     */
    public static int checkedUtf8Length(String key) {
        if (key == null || key.isEmpty()) {
            throw invalid(key, "an LMCache key must not be empty", "pass a non-empty key");
        }
        if (isPythonSpace(key.charAt(0)) || isPythonSpace(key.charAt(key.length() - 1))) {
            throw invalid(key, "an LMCache key must not start or end with whitespace: the server strips it",
                    "trim the key before use");
        }
        int bytes = 0;
        for (int i = 0; i < key.length(); i++) {
            char c = key.charAt(i);
            if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < key.length()
                    && Character.isLowSurrogate(key.charAt(i + 1))) {
                bytes += 4;
                i++;
            } else if (Character.isSurrogate(c)) {
                throw invalid(key, "the key holds an unpaired UTF-16 surrogate at index " + i
                        + " and has no UTF-8 form", "build keys from valid Unicode text");
            } else {
                bytes += 3;
            }
        }
        if (bytes > LmWire.KEY_BYTES) {
            throw invalid(key, "the key is " + bytes + " UTF-8 bytes (" + key.length() + " chars), more than the "
                            + LmWire.KEY_BYTES + "-byte key field of the LMCache protocol",
                    "shorten the model name or use a shorter key scheme; keys are never cut, since a cut key "
                            + "would collide with other keys");
        }
        return bytes;
    }

    /**
     * Writes the key, space-padded to 150 bytes, at {@code offset} of {@code dst} (absolute; the position is
     * unchanged).
     *
     * @throws KVException {@link ErrorCode#INVALID_ARGUMENT} for a key that {@link #checkedUtf8Length} refuses
     */
    public static void encode(String key, ByteBuffer dst, int offset) {
        int bytes = checkedUtf8Length(key);
        if (bytes == key.length()) {
            for (int i = 0; i < bytes; i++) {
                dst.put(offset + i, (byte) key.charAt(i));
            }
        } else {
            dst.put(offset, key.getBytes(StandardCharsets.UTF_8));
        }
        for (int i = bytes; i < LmWire.KEY_BYTES; i++) {
            dst.put(offset + i, LmWire.KEY_PAD);
        }
    }

    /**
     * Reads the 150-byte field at {@code offset} of {@code src} (absolute) as the server does: strict UTF-8, then
     * surrounding whitespace stripped.
     *
     * @throws KVException {@link ErrorCode#PROTOCOL_ERROR} when the bytes are not valid UTF-8
     */
    public static String decode(ByteBuffer src, int offset) {
        ByteBuffer field = src.slice(offset, LmWire.KEY_BYTES);
        CharBuffer chars;
        try {
            chars = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(field);
        } catch (CharacterCodingException e) {
            throw KVException.of(ErrorCode.PROTOCOL_ERROR, "the 150-byte key field is not valid UTF-8")
                    .hint("the peer does not speak the LMCache protocol, or the stream lost its framing")
                    .cause(e).build();
        }
        int from = 0;
        int to = chars.length();
        while (from < to && isPythonSpace(chars.charAt(from))) {
            from++;
        }
        while (to > from && isPythonSpace(chars.charAt(to - 1))) {
            to--;
        }
        return chars.subSequence(from, to).toString();
    }

    /** Whitespace as Python's {@code str.strip()} sees it, close enough for the characters a key may hold. */
    private static boolean isPythonSpace(char c) {
        return Character.isWhitespace(c) || Character.isSpaceChar(c) || c == '\u0085';
    }

    private static KVException invalid(String key, String detail, String hint) {
        KVException.Builder b = KVException.of(ErrorCode.INVALID_ARGUMENT, detail).hint(hint);
        if (key != null) {
            b.key(key);
        }
        return b.build();
    }
}
