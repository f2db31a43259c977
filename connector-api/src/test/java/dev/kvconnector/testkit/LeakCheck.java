package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.fail;

import dev.kvconnector.cuda.CudaStaging;
import dev.kvconnector.memory.NativeMemory;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.paged.PagedKVCache;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Fails a test that leaves native memory behind: malloc'd store values, staging pools or leases, CUDA device
 * staging leases, or paged caches that were allocated and not freed. Registered for every test through JUnit's extension auto-detection (the
 * parent pom turns it on), so every module that has this test-jar on its class path gets it.
 *
 * <p>Background threads may still be releasing when a test returns, so the check waits up to 5 s for the counts
 * to come back before it fails.
 */
public final class LeakCheck implements BeforeEachCallback, AfterEachCallback {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(LeakCheck.class);

    private record Counts(long mallocBlocks, long mallocBytes, long pools, long leases, long pagedCaches,
                          long deviceLeases) {
        static Counts now() {
            return new Counts(NativeMemory.liveBlocks(), NativeMemory.liveBytes(), SegmentPool.livePools(),
                    SegmentPool.liveLeases(), PagedKVCache.liveAllocated(), CudaStaging.liveDeviceLeases());
        }
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        context.getStore(NS).put("before", Counts.now());
    }

    @Override
    public void afterEach(ExtensionContext context) throws InterruptedException {
        Counts before = context.getStore(NS).get("before", Counts.class);
        long deadline = System.nanoTime() + 5_000_000_000L;
        Counts after = Counts.now();
        while (!after.equals(before) && System.nanoTime() < deadline) {
            Thread.sleep(20);
            after = Counts.now();
        }
        if (!after.equals(before)) {
            fail("native memory leaked by " + context.getDisplayName() + ": before " + before + ", after " + after);
        }
    }
}
