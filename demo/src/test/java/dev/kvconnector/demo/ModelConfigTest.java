package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.tensor.DType;
import org.junit.jupiter.api.Test;

class ModelConfigTest {
    @Test
    void defaultIsTheBriefsSmallLlama() {
        ModelConfig c = ModelConfig.small(0);
        assertEquals(8, c.layers());
        assertEquals(512, c.hiddenSize());
        assertEquals(8, c.heads());
        assertEquals(2, c.kvHeads());
        assertEquals(64, c.headSize());
        assertEquals(256, c.vocabSize());
        assertEquals(2048, c.maxContext());
    }

    @Test
    void kvLayoutIsExactFp32MhaInBlocksOf16() {
        var l = ModelConfig.small(0).kvLayout();
        assertEquals(AttentionKind.MHA, l.kind());
        assertEquals(DType.FP32, l.dtype());
        assertEquals(16, l.blockSize());
        assertEquals(8, l.numLayers());
        assertEquals(2, l.kvHeads());
        assertEquals(64, l.headSize());
        assertEquals(512, l.hiddenSize());
    }

    @Test
    void theSeedIsPartOfTheModelId() {
        assertNotEquals(ModelConfig.small(1).modelId(), ModelConfig.small(2).modelId());
        assertEquals(ModelConfig.small(1).modelId(), ModelConfig.small(0).withSeed(1).modelId());
    }

    @Test
    void impossibleShapesAreRefused() {
        KVException e = assertThrows(KVException.class,
                () -> new ModelConfig(2, 64, 3, 2, 16, 128, 256, 64, 10_000f, 1e-5f, 0));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertThrows(KVException.class, () -> new ModelConfig(2, 64, 4, 2, 15, 128, 256, 64, 10_000f, 1e-5f, 0));
        assertThrows(KVException.class, () -> new ModelConfig(2, 64, 4, 2, 16, 128, 100, 64, 10_000f, 1e-5f, 0));
        assertThrows(KVException.class, () -> new ModelConfig(0, 64, 4, 2, 16, 128, 256, 64, 10_000f, 1e-5f, 0));
    }

    @Test
    void rolesParseVllmAndShortNames() {
        assertEquals(KVRole.PRODUCER, KVRole.parse("kv_producer"));
        assertEquals(KVRole.CONSUMER, KVRole.parse("Consumer"));
        assertEquals(KVRole.BOTH, KVRole.parse("kv_both"));
        assertEquals(KVRole.NONE, KVRole.parse("none"));
        assertEquals("kv_both", KVRole.BOTH.vllmName());
        assertEquals(ErrorCode.INVALID_CONFIG, assertThrows(KVException.class, () -> KVRole.parse("kv_prefill")).code());
        assertThrows(KVException.class, () -> KVRole.parse(null));
    }
}
