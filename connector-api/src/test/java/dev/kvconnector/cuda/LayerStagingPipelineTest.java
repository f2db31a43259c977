package dev.kvconnector.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.IntStream;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class LayerStagingPipelineTest {

    @Test
    void copiesTheNextLayerBeforePuttingTheCurrentOne() {
        RecordingStagesTestDouble stages = new RecordingStagesTestDouble();
        LayerStagingPipeline.run(4, stages);
        assertEquals(List.of(
                "copy 0 b0", "copy 1 b1", "await b0", "put 0 b0",
                "copy 2 b0", "await b1", "put 1 b1",
                "copy 3 b1", "await b0", "put 2 b0",
                "await b1", "put 3 b1"), stages.calls);
    }

    @Test
    void oneLayerIsCopyAwaitPutAndZeroLayersDoNothing() {
        RecordingStagesTestDouble one = new RecordingStagesTestDouble();
        LayerStagingPipeline.run(1, one);
        assertEquals(List.of("copy 0 b0", "await b0", "put 0 b0"), one.calls);
        RecordingStagesTestDouble none = new RecordingStagesTestDouble();
        LayerStagingPipeline.run(0, none);
        assertEquals(List.of(), none.calls);
    }

    @Test
    void rejectsNegativeLayerCount() {
        KVException e = assertThrows(KVException.class,
                () -> LayerStagingPipeline.run(-1, new RecordingStagesTestDouble()));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("layers=-1"), e.getMessage());
    }

    @Property(tries = 64)
    void everyLayerIsPutOnceInOrderWithNoBufferRace(@ForAll @IntRange(min = 1, max = 128) int layers) {
        RecordingStagesTestDouble stages = new RecordingStagesTestDouble();
        LayerStagingPipeline.run(layers, stages);
        assertEquals(IntStream.range(0, layers).boxed().toList(), stages.putLayers);
        assertEquals(layers * 3, stages.calls.size());
        stages.assertNoCopyInFlight();
    }

    @Test
    void failedPutWaitsForTheCopyInFlightThenRethrowsTheSameException() {
        RecordingStagesTestDouble stages = new RecordingStagesTestDouble().failOn("put 1 b1");
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> LayerStagingPipeline.run(5, stages));
        assertTrue(e.getMessage().contains("put 1 b1"), e.getMessage());
        assertEquals(List.of("copy 0 b0", "copy 1 b1", "await b0", "put 0 b0", "copy 2 b0", "await b1", "put 1 b1",
                "await b0"), stages.calls);
        stages.assertNoCopyInFlight();
    }

    @Test
    void failedCopyStartIsNotAwaitedButTheOtherBufferIs() {
        RecordingStagesTestDouble stages = new RecordingStagesTestDouble().failOn("copy 2 b0");
        assertThrows(IllegalStateException.class, () -> LayerStagingPipeline.run(4, stages));
        assertEquals(List.of("copy 0 b0", "copy 1 b1", "await b0", "put 0 b0", "copy 2 b0", "await b1"),
                stages.calls);
    }

    @Test
    void failedAwaitIsNotRetriedAndTheLastLayerFailureLeavesNothingPending() {
        RecordingStagesTestDouble stages = new RecordingStagesTestDouble().failOn("await b1");
        assertThrows(IllegalStateException.class, () -> LayerStagingPipeline.run(2, stages));
        assertEquals(List.of("copy 0 b0", "copy 1 b1", "await b0", "put 0 b0", "await b1"), stages.calls);
    }

    @Test
    void failureWhileDrainingIsAddedAsSuppressed() {
        LayerStagingPipeline.Stages stages = new LayerStagingPipeline.Stages() {
            @Override
            public void startCopy(int layer, int buffer) {
            }

            @Override
            public void awaitCopy(int buffer) {
                if (buffer == 1) {
                    throw new IllegalStateException("device lost");
                }
            }

            @Override
            public void put(int layer, int buffer) {
                throw new IllegalArgumentException("store down");
            }
        };
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> LayerStagingPipeline.run(3, stages));
        assertEquals(1, e.getSuppressed().length);
        assertSame(IllegalStateException.class, e.getSuppressed()[0].getClass());
    }

    /**
     * Copies run on another thread, as DMA does, and take a random time; each put checks that its buffer holds
     * exactly its layer's bytes. A copy racing a put would corrupt the checked bytes.
     */
    @Test
    void asynchronousCopiesNeverOverwriteABufferBeingPut() throws Exception {
        int layers = 48;
        int bytes = 64 * 1024;
        ExecutorService dma = Executors.newSingleThreadExecutor();
        try (Arena arena = Arena.ofShared()) {
            MemorySegment[] device = new MemorySegment[layers];
            for (int l = 0; l < layers; l++) {
                device[l] = arena.allocate(bytes, 16);
                device[l].fill((byte) (l + 1));
            }
            MemorySegment[] staging = {arena.allocate(bytes, 16), arena.allocate(bytes, 16)};
            @SuppressWarnings("unchecked")
            Future<?>[] copies = new Future<?>[2];
            List<Integer> put = new ArrayList<>();
            LayerStagingPipeline.run(layers, new LayerStagingPipeline.Stages() {
                @Override
                public void startCopy(int layer, int buffer) {
                    copies[buffer] = dma.submit(() -> {
                        LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(200_000));
                        MemorySegment.copy(device[layer], 0, staging[buffer], 0, bytes);
                    });
                }

                @Override
                public void awaitCopy(int buffer) {
                    try {
                        copies[buffer].get();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }

                @Override
                public void put(int layer, int buffer) {
                    LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(200_000));
                    byte want = (byte) (layer + 1);
                    for (long i = 0; i < bytes; i += 997) {
                        assertEquals(want, staging[buffer].get(ValueLayout.JAVA_BYTE, i), "layer " + layer);
                    }
                    assertEquals(-1L, device[layer].mismatch(staging[buffer]), "layer " + layer);
                    put.add(layer);
                }
            });
            assertEquals(IntStream.range(0, layers).boxed().toList(), put);
        } finally {
            dma.shutdownNow();
        }
    }
}
