package dev.kvconnector.tensor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

class TensorTest {

    @Test
    void dtypesKnowTheirWidthsAndNames() {
        assertEquals(2, DType.BF16.byteWidth());
        assertEquals(DType.FP8_E4M3, DType.fromSafetensorsName("F8_E4M3"));
        assertEquals(DType.FP16, DType.parse("half"));
        assertEquals(DType.BF16, DType.parse("torch.bfloat16"));
        assertEquals(DType.INT64, DType.byIdOrNull(DType.INT64.id()));
        assertEquals(ErrorCode.DTYPE_MISMATCH, assertThrows(KVException.class, () -> DType.parse("fp4")).code());
    }

    @Test
    void segmentSizeMustMatchTheSpec() {
        try (Arena a = Arena.ofConfined()) {
            TensorSpec spec = TensorSpec.of(DType.BF16, 4, 8);
            assertEquals(64, spec.byteSize());
            assertEquals(ErrorCode.SHAPE_MISMATCH, assertThrows(KVException.class,
                    () -> Tensor.host(spec, a.allocate(63))).code());
        }
    }

    @Test
    void shapesThatOverflowAreRejected() {
        assertEquals(ErrorCode.SHAPE_MISMATCH, assertThrows(KVException.class,
                () -> TensorSpec.of(DType.INT64, 1L << 40, 1L << 30)).code());
        assertThrows(KVException.class, () -> TensorSpec.of(DType.INT8, -1));
    }

    @Test
    void deviceMemoryIsRepresentableButNotReadOnTheHostPath() {
        TensorSpec spec = TensorSpec.of(DType.FP16, 2);
        Tensor t = new Tensor(spec, MemorySegment.ofAddress(0x7000_0000L).reinterpret(4), MemoryLocation.cuda(1));
        assertEquals("cuda:1", t.location().toString());
        assertEquals(ErrorCode.UNSUPPORTED_MEMORY, assertThrows(KVException.class,
                () -> t.requireHostAccessible("put")).code());
        assertThrows(KVException.class, () -> new MemoryLocation(MemoryKind.HOST, 0));
    }
}
