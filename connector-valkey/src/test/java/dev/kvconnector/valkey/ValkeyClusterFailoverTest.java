package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.valkey.testing.RedisCluster;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A master of a real cluster with one replica per master is killed: until a replica takes over, calls on its slots
 * fail with a STORE_UNREACHABLE (or, once the cluster marks itself down, BUSY) that names the dead master; after the
 * automatic failover the same store, without a reopen, reads what was written before the kill and writes again.
 * {@code cluster-node-timeout} is 1 s so that the failover takes seconds.
 */
class ValkeyClusterFailoverTest {
    /** First slot of the first master's range, as {@code redis-cli --cluster create} assigns them. */
    private static final String KEY_ON_FIRST_MASTER = "{06S}:layer";
    private RedisCluster cluster;

    @BeforeEach
    void start() {
        cluster = RedisCluster.start(3, 1, null, 1000);
    }

    @AfterEach
    void stop() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void afterAMasterDiesTheStoreFailsClearlyThenFollowsThePromotedReplica() throws Exception {
        RedisServerProcess master = cluster.nodes().get(0);
        assertTrue(ClusterSlots.slot(KEY_ON_FIRST_MASTER) <= 5460, "the key must hash into the first master's range");
        String uri = "valkey+cluster://" + cluster.seeds() + "?pool=2&timeout=2s&connect-timeout=500ms";
        try (KVStore store = KVStores.open(uri); Arena arena = Arena.ofConfined()) {
            MemorySegment v = Segments.random(arena, 300_000, '*', 7);
            MemorySegment dst = Segments.zeroed(arena, v.byteSize());
            assertTrue(store.put(KEY_ON_FIRST_MASTER, v, PutOptions.DEFAULT));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!cluster.replicasCaughtUp(master, 1)) {
                if (System.nanoTime() > deadline) {
                    fail("the replica of " + master.hostPort() + " did not catch up");
                }
                Thread.sleep(20);
            }

            master.kill();
            KVException e = assertThrows(KVException.class, () -> store.getInto(KEY_ON_FIRST_MASTER, dst));
            // Right after the kill the other nodes still map the slot to the dead master (a failure is detected
            // after cluster-node-timeout), so the store says exactly that.
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code(), e.toString());
            assertTrue(e.getMessage().contains("the master of slot 0, " + master.hostPort() + ", is unreachable"),
                    e.getMessage());
            assertTrue(e.hint().contains("cluster-node-timeout"), e.hint());

            long r = Long.MIN_VALUE;
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (r == Long.MIN_VALUE) {
                try {
                    r = store.getInto(KEY_ON_FIRST_MASTER, dst);
                } catch (KVException notYet) {
                    assertTrue(notYet.code() == ErrorCode.STORE_UNREACHABLE || notYet.code() == ErrorCode.BUSY,
                            notYet.toString());
                    if (System.nanoTime() > deadline) {
                        fail("no replica took over from " + master.hostPort() + " in 30 s: " + notYet);
                    }
                    Thread.sleep(100);
                }
            }
            assertEquals(v.byteSize(), r);
            assertEquals(-1, Segments.mismatch(v, dst, v.byteSize()), "the promoted replica holds the value");
            MemorySegment w = Segments.random(arena, 1000, '$', 8);
            assertTrue(store.put(KEY_ON_FIRST_MASTER, w, PutOptions.DEFAULT));
            assertEquals(1000, store.size(KEY_ON_FIRST_MASTER));
            assertTrue(store.healthCheck().contains("16384 of 16384 slots covered"), store.healthCheck());
        }
    }
}
