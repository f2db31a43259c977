package dev.kvconnector.cuda;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import org.junit.jupiter.api.Test;

class CudaResultTest {

    @Test
    void namesCodesAsCudaHDoes() {
        assertEquals("CUDA_SUCCESS", CudaResult.name(0));
        assertEquals("CUDA_ERROR_OUT_OF_MEMORY", CudaResult.name(2));
        assertEquals("CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", CudaResult.name(36));
        assertEquals("CUresult 35", CudaResult.name(35), "35 is the runtime API's cudaErrorInsufficientDriver");
        assertEquals("CUDA_ERROR_NO_DEVICE", CudaResult.name(100));
        assertEquals("CUDA_ERROR_INVALID_CONTEXT", CudaResult.name(201));
        assertEquals("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", CudaResult.name(222));
        assertEquals("CUDA_ERROR_ILLEGAL_ADDRESS", CudaResult.name(700));
        assertEquals("CUDA_ERROR_UNKNOWN", CudaResult.name(999));
    }

    @Test
    void unknownCodeIsNamedByNumberAndPointsAtTheDocs() {
        assertEquals("CUresult 12345", CudaResult.name(12345));
        assertTrue(CudaResult.hint(12345).contains("CUresult 12345"));
        assertEquals(ErrorCode.STORE_ERROR, CudaResult.errorCode(12345));
    }

    @Test
    void noDeviceAndOldDriverMeanDeviceMemoryIsUnsupportedHere() {
        assertEquals(ErrorCode.UNSUPPORTED_MEMORY, CudaResult.errorCode(CudaResult.NO_DEVICE));
        assertEquals(ErrorCode.UNSUPPORTED_MEMORY, CudaResult.errorCode(CudaResult.CALL_REQUIRES_NEWER_DRIVER));
        assertEquals(ErrorCode.UNSUPPORTED_MEMORY, CudaResult.errorCode(34));
        assertEquals(ErrorCode.UNSUPPORTED_MEMORY, CudaResult.errorCode(CudaResult.UNSUPPORTED_PTX_VERSION));
        assertTrue(CudaResult.hint(CudaResult.NO_DEVICE).contains("CUDA_VISIBLE_DEVICES"));
        assertTrue(CudaResult.hint(34).contains("stub"));
    }

    @Test
    void callerBugsAreInternalAndDeviceFaultsAreStoreErrors() {
        assertEquals(ErrorCode.INTERNAL, CudaResult.errorCode(1));
        assertEquals(ErrorCode.INTERNAL, CudaResult.errorCode(CudaResult.INVALID_CONTEXT));
        assertEquals(ErrorCode.INTERNAL, CudaResult.errorCode(716));
        assertEquals(ErrorCode.STORE_ERROR, CudaResult.errorCode(CudaResult.OUT_OF_MEMORY));
        assertEquals(ErrorCode.STORE_ERROR, CudaResult.errorCode(700));
        assertEquals(ErrorCode.STORE_ERROR, CudaResult.errorCode(CudaResult.UNKNOWN));
    }

    @Test
    void checkPassesSuccessAndThrowsANamedErrorWithTheNativeCode() {
        assertDoesNotThrow(() -> CudaResult.check(0, "cuMemAlloc_v2", "of 1 bytes"));
        KVException e = assertThrows(KVException.class,
                () -> CudaResult.check(2, "cuMemAlloc_v2", "of 1099511627776 bytes"));
        assertEquals(ErrorCode.STORE_ERROR, e.code());
        assertEquals(2, e.nativeCode());
        assertEquals("cuMemAlloc_v2", e.operation());
        assertTrue(e.getMessage().contains("CUDA_ERROR_OUT_OF_MEMORY (2)"), e.getMessage());
        assertTrue(e.getMessage().contains("1099511627776 bytes"), e.getMessage());
        assertTrue(e.hint().contains("gpu_memory_utilization"), e.hint());
    }

    @Test
    void everyCodeHasANameAndAHint() {
        for (int code = 0; code < 1000; code++) {
            String name = CudaResult.name(code);
            assertTrue(name.startsWith("CUDA_") || name.equals("CUresult " + code), name);
            assertTrue(!CudaResult.hint(code).isBlank(), "hint for " + code);
        }
    }
}
