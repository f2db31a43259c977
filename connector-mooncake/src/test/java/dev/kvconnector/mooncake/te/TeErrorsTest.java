package dev.kvconnector.mooncake.te;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import org.junit.jupiter.api.Test;

/** Each return code of the C ABI becomes a named error with a hint and the numbers that locate it. */
class TeErrorsTest {
    private static final String URI = "mooncake-te://127.0.0.1";

    @Test
    void timedOutTransferIsTimeoutNamingRangeAndSegment() {
        KVException e = TransferEngineErrors.transferFailed(URI, TransferState.TIMEOUT, true, "10.0.0.7:15000",
                0x1000, 0x7f0000002000L, 4096);
        assertEquals(ErrorCode.TIMEOUT, e.code());
        assertTrue(e.getMessage().contains("WRITE of 4096 bytes at 0x1000 to 4096 bytes at 0x7f0000002000 on "
                + "10.0.0.7:15000"), e.getMessage());
        assertNotNull(e.hint());
        assertEquals(TransferState.TIMEOUT.code(), e.nativeCode());
    }

    @Test
    void failedReadIsIoErrorAskingWhetherTheRangeIsRegistered() {
        KVException e = TransferEngineErrors.transferFailed(URI, TransferState.FAILED, false, "h:1", 0x10, 0x20, 8);
        assertEquals(ErrorCode.IO_ERROR, e.code());
        assertTrue(e.getMessage().contains("READ into 8 bytes at 0x10 from 8 bytes at 0x20 on h:1"),
                e.getMessage());
        assertTrue(e.hint().contains("8 bytes at 0x20"), e.hint());
    }

    @Test
    void submitCodesAreNamed() {
        KVException tooMany = TransferEngineErrors.submitFailed(URI, TransferEngineErrors.TOO_MANY_REQUESTS, 3, 2);
        assertEquals(ErrorCode.INVALID_ARGUMENT, tooMany.code());
        assertTrue(tooMany.getMessage().contains("too many requests for a batch of 2"), tooMany.getMessage());
        KVException busy = TransferEngineErrors.submitFailed(URI, TransferEngineErrors.BUSY, 1, 1);
        assertEquals(ErrorCode.BUSY, busy.code());
        KVException invalid = TransferEngineErrors.submitFailed(URI, TransferEngineErrors.INVALID_ARGUMENT, 1, 1);
        assertTrue(invalid.hint().contains("segment still open"), invalid.hint());
    }

    @Test
    void freeingABusyBatchIsBusyWithAHint() {
        KVException e = TransferEngineErrors.freeBatchFailed(URI, TransferEngineErrors.BUSY);
        assertEquals(ErrorCode.BUSY, e.code());
        assertTrue(e.hint().contains("terminal state"), e.hint());
    }

    @Test
    void overlappingRegistrationIsNamedByItsCode() {
        KVException e = TransferEngineErrors.registerFailed(URI, 0x4000, 64, "cpu:0",
                TransferEngineErrors.ERR_ADDRESS_OVERLAPPED);
        assertTrue(e.getMessage().contains("64 bytes at 0x4000 at cpu:0"), e.getMessage());
        assertTrue(e.getMessage().contains("overlaps"), e.getMessage());
        assertEquals(-7, e.nativeCode());
    }

    @Test
    void everyNativeStateHasItsName() {
        for (TransferState s : TransferState.values()) {
            assertEquals(s, TransferState.of(s.code()));
        }
        assertEquals(null, TransferState.of(7));
        assertEquals(4, TransferState.COMPLETED.code());
        assertEquals(6, TransferState.FAILED.code());
    }
}
