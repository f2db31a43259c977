package dev.kvconnector.lmcache.format;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class LmChunkFormatTest {
    private record Tensors(MemorySegment[] k, MemorySegment[] v) {
    }

    private static Tensors random(Arena arena, LmChunkGeometry g, int start, long seed) {
        Random r = new Random(seed);
        long bytes = (start + g.tokens()) * g.tokenBytes();
        MemorySegment[] k = new MemorySegment[g.layers()];
        MemorySegment[] v = new MemorySegment[g.layers()];
        for (int l = 0; l < g.layers(); l++) {
            k[l] = arena.allocate(bytes);
            v[l] = arena.allocate(bytes);
            for (long i = 0; i < bytes; i++) {
                k[l].set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
                v[l].set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
            }
        }
        return new Tensors(k, v);
    }

    /** The element index of (layer, kv, token, head, dim) in each layout, written from the shapes in the spec. */
    private static long index(LmChunkFormat f, LmChunkGeometry g, int l, int kv, int t, int h, int d) {
        long lt = g.layers();
        long tt = g.tokens();
        long ht = g.heads();
        long dt = g.headSize();
        return switch (f) {
            case V0_VLLM -> (((l * 2L + kv) * tt + t) * ht + h) * dt + d;
            case V0_HUGGINGFACE -> (((l * 2L + kv) * ht + h) * tt + t) * dt + d;
            case V1_KV_2LTD -> ((kv * lt + l) * tt + t) * (ht * dt) + h * dt + d;
            case V1_KV_MLA -> (l * tt + t) * dt + d;
        };
    }

    private static LmChunkGeometry geometry(LmChunkFormat f, int layers, int tokens, int heads, int headSize,
                                            int width) {
        return new LmChunkGeometry(layers, tokens, f == LmChunkFormat.V1_KV_MLA ? 1 : heads, headSize, width);
    }

    @Property(tries = 200)
    void packPlacesEveryElementWhereTheShapeSays(@ForAll LmChunkFormat format,
                                                 @ForAll @IntRange(min = 1, max = 4) int layers,
                                                 @ForAll @IntRange(min = 1, max = 9) int tokens,
                                                 @ForAll @IntRange(min = 1, max = 4) int heads,
                                                 @ForAll @IntRange(min = 1, max = 8) int headSize,
                                                 @ForAll @IntRange(min = 0, max = 2) int widthLog2,
                                                 @ForAll @IntRange(min = 0, max = 5) int start,
                                                 @ForAll long seed) {
        LmChunkGeometry g = geometry(format, layers, tokens, heads, headSize, 1 << widthLog2);
        try (Arena arena = Arena.ofConfined()) {
            Tensors src = random(arena, g, start, seed);
            MemorySegment chunk = arena.allocate(format.chunkBytes(g));
            format.pack(src.k(), src.v(), start, g, chunk);
            int e = g.elementBytes();
            for (int l = 0; l < layers; l++) {
                for (int kv = 0; kv < format.tensorsPerLayer(); kv++) {
                    MemorySegment tensor = kv == 0 ? src.k()[l] : src.v()[l];
                    for (int t = 0; t < tokens; t++) {
                        for (int h = 0; h < g.heads(); h++) {
                            for (int d = 0; d < headSize; d++) {
                                long from = (((long) (start + t) * g.heads() + h) * headSize + d) * e;
                                long to = index(format, g, l, kv, t, h, d) * e;
                                assertEquals(-1, tensor.asSlice(from, e).mismatch(chunk.asSlice(to, e)),
                                        format + " l=" + l + " kv=" + kv + " t=" + t + " h=" + h + " d=" + d);
                            }
                        }
                    }
                }
            }
        }
    }

    @Property(tries = 200)
    void unpackRestoresWhatPackTook(@ForAll LmChunkFormat format,
                                    @ForAll @IntRange(min = 1, max = 4) int layers,
                                    @ForAll @IntRange(min = 1, max = 17) int tokens,
                                    @ForAll @IntRange(min = 1, max = 4) int heads,
                                    @ForAll @IntRange(min = 1, max = 16) int headSize,
                                    @ForAll @IntRange(min = 0, max = 3) int widthLog2,
                                    @ForAll @IntRange(min = 0, max = 5) int start,
                                    @ForAll long seed) {
        LmChunkGeometry g = geometry(format, layers, tokens, heads, headSize, 1 << widthLog2);
        try (Arena arena = Arena.ofConfined()) {
            Tensors src = random(arena, g, start, seed);
            MemorySegment chunk = arena.allocate(format.chunkBytes(g));
            format.pack(src.k(), src.v(), start, g, chunk);
            Tensors back = random(arena, g, start, ~seed);
            format.unpack(chunk, g, back.k(), back.v(), start);
            long from = start * g.tokenBytes();
            for (int l = 0; l < layers; l++) {
                assertEquals(-1, src.k()[l].asSlice(from).mismatch(back.k()[l].asSlice(from)), "K layer " + l);
                if (format.tensorsPerLayer() == 2) {
                    assertEquals(-1, src.v()[l].asSlice(from).mismatch(back.v()[l].asSlice(from)), "V layer " + l);
                }
            }
        }
    }

    @Test
    void chunkBytesIsTheProductOfTheShape() {
        LmChunkGeometry g = new LmChunkGeometry(32, 256, 8, 128, 2);
        for (LmChunkFormat f : LmChunkFormat.values()) {
            LmChunkGeometry gf = f == LmChunkFormat.V1_KV_MLA ? new LmChunkGeometry(32, 256, 1, 576, 2) : g;
            long elements = Arrays.stream(f.shape(gf)).reduce(1, (a, b) -> a * b);
            assertEquals(elements * 2, f.chunkBytes(gf), f.name());
        }
        assertEquals(1, LmChunkFormat.V1_KV_2LTD.memoryFormat());
        assertEquals(6, LmChunkFormat.V1_KV_MLA.memoryFormat());
        assertTrue(Arrays.equals(new long[] {2, 32, 256, 1024}, LmChunkFormat.V1_KV_2LTD.shape(g)));
    }

    @Test
    void wrongSizesAreShapeMismatchesNamingTheNumbers() {
        LmChunkGeometry g = new LmChunkGeometry(2, 4, 2, 8, 2);
        try (Arena arena = Arena.ofConfined()) {
            Tensors t = random(arena, g, 0, 1);
            KVException small = assertThrows(KVException.class, () -> LmChunkFormat.V0_VLLM.pack(t.k(), t.v(), 0, g,
                    arena.allocate(LmChunkFormat.V0_VLLM.chunkBytes(g) - 1)));
            assertEquals(ErrorCode.SHAPE_MISMATCH, small.code());
            assertTrue(small.getMessage().contains("needs 512 bytes"), small.getMessage());
            KVException shortTensor = assertThrows(KVException.class, () -> LmChunkFormat.V1_KV_2LTD.pack(t.k(),
                    t.v(), 1, g, arena.allocate(512)));
            assertTrue(shortTensor.getMessage().contains("layer 0"), shortTensor.getMessage());
            assertEquals(ErrorCode.SHAPE_MISMATCH, assertThrows(KVException.class,
                    () -> LmChunkFormat.V1_KV_MLA.pack(t.k(), null, 0, g, arena.allocate(512))).code());
            assertEquals(ErrorCode.SHAPE_MISMATCH, assertThrows(KVException.class,
                    () -> LmChunkFormat.V0_VLLM.pack(t.k(), null, 0, g, arena.allocate(512))).code());
        }
    }
}
