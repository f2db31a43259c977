package dev.kvconnector.mooncake.te;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/**
 * A notification as the engine takes it: a {@code notify_msg_t} (two {@code char *}) at the start of a native
 * scratch, followed by the name and the message in UTF-8, NUL-terminated. Written without allocating, so that a
 * notification per layer costs no garbage.
 */
final class NotifyText {
    /** Bytes of text a scratch holds after the struct: name and message with their NULs. */
    static final int BYTES = 4096;

    private NotifyText() {
    }

    /** A scratch for one notification at a time, in {@code arena}. */
    static MemorySegment allocate(Arena arena) {
        return arena.allocate(TransferEngineLibrary.NOTIFY_MSG.byteSize() + BYTES, 8);
    }

    /** The {@code notify_msg_t} at the start of {@code scratch}, to pass by value; slice it once and keep it. */
    static MemorySegment header(MemorySegment scratch) {
        return scratch.asSlice(0, TransferEngineLibrary.NOTIFY_MSG.byteSize());
    }

    /**
     * Writes {@code name} and {@code message} into {@code scratch} and points its {@code notify_msg_t} at them.
     * The bytes are those of {@code String.getBytes(UTF_8)} (an unpaired surrogate becomes {@code ?}).
     *
     * @throws KVException {@code INVALID_ARGUMENT} when both do not fit the scratch (4094 bytes of UTF-8)
     */
    static void write(MemorySegment scratch, CharSequence name, CharSequence message) {
        long nameAt = TransferEngineLibrary.NOTIFY_MSG.byteSize();
        long msgAt = putCString(scratch, nameAt, name);
        long end = msgAt < 0 ? -1 : putCString(scratch, msgAt, message);
        if (end < 0) {
            long bytes = name.toString().getBytes(StandardCharsets.UTF_8).length
                    + message.toString().getBytes(StandardCharsets.UTF_8).length;
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a notification of " + bytes + " bytes (name and "
                    + "message, UTF-8) exceeds " + (scratch.byteSize() - nameAt - 2) + " bytes")
                    .operation("notify").hint("send ids in notifications, not payloads").build();
        }
        // char * fields: 64-bit pointers on every platform the engine runs on
        scratch.set(JAVA_LONG, 0, scratch.address() + nameAt);
        scratch.set(JAVA_LONG, ADDRESS.byteSize(), scratch.address() + msgAt);
    }

    /** Writes {@code s} in UTF-8 at {@code at}, then a NUL; the offset after the NUL, or -1 when it does not fit. */
    private static long putCString(MemorySegment dst, long at, CharSequence s) {
        long end = dst.byteSize();
        for (int i = 0; i < s.length(); i++) {
            int c = s.charAt(i);
            if (Character.isHighSurrogate((char) c) && i + 1 < s.length()
                    && Character.isLowSurrogate(s.charAt(i + 1))) {
                c = Character.toCodePoint((char) c, s.charAt(++i));
            } else if (Character.isSurrogate((char) c)) {
                c = '?';
            }
            int n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
            if (at + n + 1 > end) {
                return -1;
            }
            int lead = switch (n) {
                case 1 -> 0;
                case 2 -> 0xC0;
                case 3 -> 0xE0;
                default -> 0xF0;
            };
            dst.set(JAVA_BYTE, at++, (byte) (lead | c >>> (6 * (n - 1))));
            for (int k = n - 2; k >= 0; k--) {
                dst.set(JAVA_BYTE, at++, (byte) (0x80 | (c >>> (6 * k)) & 0x3F));
            }
        }
        dst.set(JAVA_BYTE, at++, (byte) 0);
        return at;
    }
}
