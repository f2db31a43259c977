package dev.kvconnector.store;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * RFC 3986 percent-encoding of URI components over UTF-8. Unlike {@link java.net.URLDecoder} (HTML forms), a
 * {@code +} is a {@code +}, and a bad escape is a {@link BadEncodingException} whose text never quotes the input, so
 * that the caller decides whether the component may be shown.
 */
final class PercentCoding {
    private static final char[] HEX = "0123456789ABCDEF".toCharArray();

    /** A component that does not decode; {@link #problem()} and {@link #remedy()} hold no part of it. */
    static final class BadEncodingException extends Exception {
        private final String remedy;

        BadEncodingException(String problem, String remedy) {
            super(problem, null, false, false);
            this.remedy = remedy;
        }

        /** What is wrong, such as "holds a '%' that two hex digits do not follow". */
        String problem() {
            return getMessage();
        }

        /** How to write it instead. */
        String remedy() {
            return remedy;
        }
    }

    private PercentCoding() {
    }

    /** Decodes every {@code %XX} and reads the bytes as UTF-8; characters outside escapes stay as they are. */
    static String decode(String s) throws BadEncodingException {
        if (s.indexOf('%') < 0) {
            return s;
        }
        byte[] raw = s.getBytes(StandardCharsets.UTF_8);
        ByteBuffer out = ByteBuffer.allocate(raw.length);
        for (int i = 0; i < raw.length; i++) {
            if (raw[i] != '%') {
                out.put(raw[i]);
                continue;
            }
            int hi = i + 1 < raw.length ? Character.digit(raw[i + 1], 16) : -1;
            int lo = i + 2 < raw.length ? Character.digit(raw[i + 2], 16) : -1;
            if (hi < 0 || lo < 0) {
                throw new BadEncodingException("holds a '%' that two hex digits do not follow",
                        "write a literal '%' as %25");
            }
            out.put((byte) (hi << 4 | lo));
            i += 2;
        }
        out.flip();
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(out).toString();
        } catch (CharacterCodingException e) {
            throw new BadEncodingException("holds percent-encoded bytes that are not UTF-8",
                    "percent-encode the UTF-8 bytes of each character, such as %C3%A9 for \u00e9");
        }
    }

    /** Encodes every UTF-8 byte outside the unreserved set {@code A-Z a-z 0-9 - . _ ~} as {@code %XX}. */
    static String encode(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            int c = b & 0xff;
            if (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.'
                    || c == '_' || c == '~') {
                sb.append((char) c);
            } else {
                sb.append('%').append(HEX[c >> 4]).append(HEX[c & 15]);
            }
        }
        return sb.toString();
    }
}
