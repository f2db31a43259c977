package dev.kvconnector.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

class VllmV0CodecTest {
    private static final KVLayout MHA = new KVLayout("v0-mha", AttentionKind.MHA, 3, 2, 8, DType.BF16, 4, 16);
    private static final KVLayout MLA = new KVLayout("v0-mla", AttentionKind.MLA, 2, 1, 24, DType.BF16, 4, 16);

    private static KeyPlan keys(KVLayout layout, int tokens) {
        int[] t = new int[tokens];
        for (int i = 0; i < tokens; i++) {
            t[i] = i + 1;
        }
        return KeySchemes.byName("vllm-v0").plan(new KeyContext("m", layout, 0, 1, 256), RequestTokens.of(t));
    }

    @Test
    void theSchemeAndCodecPairAndTheWholeRequestIsOneObject() {
        VllmV0Codec codec = VllmV0Codec.of(3);
        ObjectCodec.requirePair(KeySchemes.byName("vllm-v0"), codec);
        KVException wrong = assertThrows(KVException.class,
                () -> ObjectCodec.requirePair(KeySchemes.byName("kvc-v1"), codec));
        assertEquals(ErrorCode.UNSUPPORTED, wrong.code());
        ObjectPlan plan = codec.plan(keys(MHA, 10), MHA, true);
        assertEquals(1, plan.chunks());
        assertEquals(Completion.PER_CHUNK, plan.completion());
        assertEquals(VllmV0Object.encodedSize(VllmV0Codec.kvSpec(MHA, 10)), plan.layerObjectBytes(0, 0));
    }

    /** Tensors written at the placements and sealed are exactly what {@link VllmV0Object#encode} writes. */
    @Test
    void placementsAndSealWriteVllmsBytes() {
        int tokens = 10;
        ObjectPlan plan = VllmV0Codec.of(3).plan(keys(MHA, tokens), MHA, true);
        TensorSpec spec = VllmV0Codec.kvSpec(MHA, tokens);
        try (Arena arena = Arena.ofConfined()) {
            Tensor kv = Tensor.host(spec, Segments.random(arena, spec.byteSize(), 7));
            MemorySegment expected = arena.allocate(VllmV0Object.encodedSize(spec));
            VllmV0Object.encode(expected, kv, 3);
            MemorySegment object = arena.allocate(plan.layerObjectBytes(0, 0));
            long plane = tokens * MHA.bytesPerTokenPerTensor();
            for (int l = 0; l < 3; l++) {
                for (int t = 0; t < 2; t++) {
                    TensorPlacement p = plan.placement(0, l, t);
                    assertTrue(p.isContiguous());
                    MemorySegment.copy(kv.segment(), ((long) t * 3 + l) * plane, object, p.offset(), p.bytes());
                }
            }
            plan.seal(0, 2, object);
            assertEquals(-1, object.mismatch(expected));
            assertEquals(ObjectPlan.OK, plan.validate(0, 0, object, object.byteSize()));
        }
    }

    @Test
    void sealStoresTheMlaLatentTwiceAsVllmDoes() {
        int tokens = 7;
        ObjectPlan plan = VllmV0Codec.of(0).plan(keys(MLA, tokens), MLA, true);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment object = arena.allocate(plan.layerObjectBytes(0, 0));
            long plane = tokens * MLA.bytesPerTokenPerTensor();
            for (int l = 0; l < 2; l++) {
                MemorySegment.copy(Segments.random(arena, plane, l), 0, object, plan.placement(0, l, 0).offset(),
                        plane);
            }
            plan.seal(0, 1, object);
            VllmV0Object decoded = VllmV0Object.decode(object);
            assertEquals(TensorSpec.of(DType.BF16, 2, 2, tokens, 1, 24), decoded.tensor().spec());
            MemorySegment data = decoded.tensor().segment();
            assertEquals(-1, data.asSlice(0, 2 * plane).mismatch(data.asSlice(2 * plane, 2 * plane)));
        }
    }

    @Test
    void junkIsCorruptAndAnotherShapeOrHeaderIsALayoutMismatch() {
        ObjectPlan plan = VllmV0Codec.of(0).plan(keys(MHA, 4), MHA, true);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment junk = Segments.random(arena, plan.layerObjectBytes(0, 0), 5);
            int corrupt = plan.validate(0, 0, junk, junk.byteSize());
            assertEquals(VllmV0Codec.NOT_SAFETENSORS, corrupt);
            assertFalse(plan.isLayoutMismatch(corrupt));
            TensorSpec wrong = TensorSpec.of(DType.BF16, 2, 3, 4, 2, 4);
            MemorySegment other = arena.allocate(plan.layerObjectBytes(0, 0));
            long n = VllmV0Object.encode(other, Tensor.host(wrong, Segments.random(arena, wrong.byteSize(), 1)), 0);
            int shape = plan.validate(0, 0, other, n);
            assertEquals(VllmV0Codec.OTHER_SPEC, shape);
            assertTrue(plan.isLayoutMismatch(shape));
            assertTrue(plan.describe(shape).contains("shape"), plan.describe(shape));
        }
    }

    @Test
    void hiddenStatesAreOneObjectInTheSameFormat() {
        ObjectPlan plan = VllmV0Codec.of(2).plan(keys(MHA, 5), MHA, true);
        TensorSpec hs = TensorSpec.of(DType.BF16, 5, 16);
        assertTrue(plan.hiddenKey(0).contains("_hidden_"), plan.hiddenKey(0));
        try (Arena arena = Arena.ofConfined()) {
            Tensor h = Tensor.host(hs, Segments.random(arena, hs.byteSize(), 3));
            MemorySegment expected = arena.allocate(VllmV0Object.encodedSize(hs));
            VllmV0Object.encode(expected, h, 2);
            MemorySegment object = arena.allocate(plan.hiddenObjectBytes(0, DType.BF16));
            MemorySegment.copy(h.segment(), 0, object, plan.hiddenOffset(0), hs.byteSize());
            plan.sealHidden(0, DType.BF16, object);
            assertEquals(-1, object.mismatch(expected));
            assertEquals(ObjectPlan.OK, plan.validateHidden(0, DType.BF16, object, object.byteSize()));
        }
    }

    @Test
    void theVllmV0SchemeImpliesThisCodecAndASchemeWithoutOneIsRefusedByName() {
        assertEquals(VllmV0Codec.NAME, ObjectCodecs.forScheme(KeySchemes.byName("vllm-v0"), MHA).name());
        assertEquals(-1, ((VllmV0Codec) ObjectCodecs.forScheme(KeySchemes.byName("vllm-v0"), MHA)).deviceId(),
                "vLLM's device_id for the CPU");
        assertEquals(RawLayerCodec.INSTANCE, ObjectCodecs.forScheme(KeySchemes.byName("kvc-v1"), MHA));
        dev.kvconnector.key.KeyScheme noCodec = new dev.kvconnector.key.KeyScheme() {
            @Override
            public String name() {
                return "no-codec";
            }

            @Override
            public dev.kvconnector.key.Granularity granularity() {
                return dev.kvconnector.key.Granularity.CHUNK;
            }

            @Override
            public dev.kvconnector.key.KeyPlan plan(dev.kvconnector.key.KeyContext context,
                                                   dev.kvconnector.key.RequestTokens request) {
                throw new AssertionError("never planned");
            }
        };
        try (KVStore store = KVStores.open("memory:?capacity=1MiB")) {
            KVException e = assertThrows(KVException.class,
                    () -> StoreConnector.builder(store, MHA).keyScheme(noCodec).build());
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("no-codec implies no codec")
                    && e.getMessage().contains("vllm-v1"), e.getMessage());
        }
    }
}
