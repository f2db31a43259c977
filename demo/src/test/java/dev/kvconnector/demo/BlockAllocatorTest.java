package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class BlockAllocatorTest {
    @Test
    void allocatesAllOrNothing() {
        BlockAllocator a = new BlockAllocator(4);
        int[] three = a.allocate(3);
        KVException e = assertThrows(KVException.class, () -> a.allocate(2));
        assertEquals(ErrorCode.BUSY, e.code());
        assertEquals(1, a.freeBlocks());
        a.free(three);
        assertEquals(4, a.freeBlocks());
    }

    @Test
    void doubleFreeAndForeignBlocksAreRefused() {
        BlockAllocator a = new BlockAllocator(2);
        int[] b = a.allocate(1);
        a.free(b);
        assertThrows(KVException.class, () -> a.free(b));
        int[] c = a.allocate(1);
        assertThrows(KVException.class, () -> a.free(new int[] {7}));
        a.free(c);
        assertThrows(KVException.class, () -> new BlockAllocator(0));
    }

    @Test
    void concurrentCallersNeverShareABlock() {
        BlockAllocator a = new BlockAllocator(64);
        int[][] got = IntStream.range(0, 8).mapToObj(i -> CompletableFuture.supplyAsync(() -> a.allocate(8)))
                .map(CompletableFuture::join).toArray(int[][]::new);
        int[] all = Arrays.stream(got).flatMapToInt(Arrays::stream).sorted().toArray();
        assertEquals(64, Arrays.stream(all).distinct().count());
        assertEquals(0, a.freeBlocks());
    }
}
