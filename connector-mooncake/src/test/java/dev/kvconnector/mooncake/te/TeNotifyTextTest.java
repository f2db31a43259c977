package dev.kvconnector.mooncake.te;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The {@code notify_msg_t} a notification is passed as, written without allocating: both strings in UTF-8 exactly as
 * {@code String.getBytes(UTF_8)} encodes them, NUL-terminated, the struct's pointers at them, and a clear error when
 * they do not fit.
 */
class TeNotifyTextTest {
    private static final long HEADER = TransferEngineLibrary.NOTIFY_MSG.byteSize();

    private static byte[] cString(MemorySegment scratch, long pointerAt) {
        long at = scratch.get(JAVA_LONG, pointerAt) - scratch.address();
        long end = at;
        while (scratch.get(JAVA_BYTE, end) != 0) {
            end++;
        }
        return scratch.asSlice(at, end - at).toArray(JAVA_BYTE);
    }

    @Test
    void nameAndMessageAreUtf8AsTheJdkEncodesThemWithTheStructPointingAtThem() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment scratch = NotifyText.allocate(arena);
            String[][] cases = {
                {"req-42", "kvc-p2p/1 L 127.0.0.1:4242 3 4194304 4294967295"},
                {"t-\u00fc\u00f1\u00ee", "caf\u00e9 \u540d\u524d \uD83D\uDE00 end"},
                {"", ""},
                {"lone \uD800 high", "lone \uDC00 low at the end \uD83D"},
            };
            for (String[] c : cases) {
                NotifyText.write(scratch, c[0], new StringBuilder(c[1]));
                assertArrayEquals(c[0].getBytes(StandardCharsets.UTF_8), cString(scratch, 0), c[0]);
                assertArrayEquals(c[1].getBytes(StandardCharsets.UTF_8), cString(scratch, 8), c[1]);
            }
        }
    }

    @Test
    void textThatDoesNotFitIsRefusedNamingItsSize() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment scratch = NotifyText.allocate(arena);
            String big = "\u540d".repeat(1400);
            KVException e = assertThrows(KVException.class, () -> NotifyText.write(scratch, "t-1", big));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("a notification of 4203 bytes") && e.getMessage().contains("4094"),
                    e.getMessage());
            NotifyText.write(scratch, "t-1", "x".repeat(4094 - 3));
            assertEquals(4091, cString(scratch, 8).length, "name and message of 4094 bytes in all fit");
        }
    }
}
