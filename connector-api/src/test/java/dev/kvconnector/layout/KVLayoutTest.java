package dev.kvconnector.layout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import org.junit.jupiter.api.Test;

class KVLayoutTest {

    @Test
    void presetsMatchTheModelSizesInTheBaselines() {
        assertEquals(4096, KVLayout.preset("llama3-8b").bytesPerTokenPerLayer());
        assertEquals(512, KVLayout.preset("qwen2.5-0.5b").bytesPerTokenPerLayer());
        assertEquals(1152, KVLayout.preset("deepseek-v3-mla").bytesPerTokenPerLayer());
        assertEquals(4L << 20, KVLayout.preset("llama3-8b").layerBytes(1024));
        assertEquals(80, KVLayout.preset("llama3-70b").numLayers());
    }

    @Test
    void fingerprintIsStableAndSeparatesLayouts() {
        KVLayout l = KVLayout.preset("llama3-8b");
        assertEquals("kvlayout/1;kind=MHA;layers=32;kv_heads=8;head_size=128;dtype=BF16;hidden=4096", l.canonicalString());
        assertEquals(l.fingerprint(), new KVLayout("renamed", l.kind(), 32, 8, 128, DType.BF16, 32, 4096).fingerprint());
        assertNotEquals(l.fingerprint(), l.withDtype(DType.FP16).fingerprint());
        assertNotEquals(l.fingerprint(), l.perRank(2).fingerprint());
        assertEquals(16, l.fingerprintHex().length());
    }

    @Test
    void invalidLayoutsAndUnknownPresetsAreRejected() {
        assertThrows(KVException.class, () -> new KVLayout("x", AttentionKind.MLA, 1, 2, 8, DType.BF16, 16, 0));
        assertThrows(KVException.class, () -> new KVLayout("x", AttentionKind.MHA, 0, 2, 8, DType.BF16, 16, 0));
        KVException e = assertThrows(KVException.class, () -> KVLayout.preset("gpt-5"));
        assertTrue(e.getMessage().contains("llama3-8b"), e.getMessage());
    }

    @Test
    void sameKvBytesAsComparesWhatTheFingerprintCoversAndNothingElse() {
        KVLayout a = new KVLayout("a", AttentionKind.MHA, 4, 2, 64, DType.BF16, 16, 256);
        assertTrue(a.sameKvBytesAs(new KVLayout("other name", AttentionKind.MHA, 4, 2, 64, DType.BF16, 32, 256)),
                "name and block size only shape the paged view");
        KVLayout[] differ = {
            new KVLayout("a", AttentionKind.MLA, 4, 1, 64, DType.BF16, 16, 256),
            new KVLayout("a", AttentionKind.MHA, 5, 2, 64, DType.BF16, 16, 256),
            new KVLayout("a", AttentionKind.MHA, 4, 1, 64, DType.BF16, 16, 256),
            new KVLayout("a", AttentionKind.MHA, 4, 2, 128, DType.BF16, 16, 256),
            new KVLayout("a", AttentionKind.MHA, 4, 2, 64, DType.FP16, 16, 256),
            new KVLayout("a", AttentionKind.MHA, 4, 2, 64, DType.BF16, 16, 512)};
        for (KVLayout b : differ) {
            assertTrue(!a.sameKvBytesAs(b) && a.fingerprint() != b.fingerprint(), b.toString());
        }
    }

    @Test
    void aLayoutsFingerprintIsHashedOnceAndThenCostsNoAllocation() {
        com.sun.management.ThreadMXBean mx =
                (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        KVLayout l = KVLayout.preset("llama3-8b");
        long first = l.fingerprint();
        long best = Long.MAX_VALUE;
        for (int round = 0; round < 20; round++) {
            long before = mx.getThreadAllocatedBytes(tid);
            for (int i = 0; i < 10_000; i++) {
                assertEquals(first, l.fingerprint());
            }
            best = Math.min(best, mx.getThreadAllocatedBytes(tid) - before);
        }
        assertTrue(best < 10_000, "10000 fingerprints of one layout allocated " + best + " bytes");
        assertEquals(first, new KVLayout(l.name(), l.kind(), l.numLayers(), l.kvHeads(), l.headSize(), l.dtype(),
                l.blockSize(), l.hiddenSize()).fingerprint(), "an equal layout has the same fingerprint");
    }
}
