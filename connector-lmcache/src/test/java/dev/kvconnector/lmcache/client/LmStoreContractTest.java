package dev.kvconnector.lmcache.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.server.LmCacheServer;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.testkit.KVStoreContract;
import dev.kvconnector.testkit.Segments;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The store contract over {@code lm://} and the Java LMCache server, once per protocol version; each test gets a
 * fresh server.
 *
 * <p>The LMCache protocol has no delete, so the two contract cases that remove keys cannot pass: they are
 * disabled here by name (the contract's methods are package-private, so they cannot be overridden from this
 * package), and {@link OverVersion#removeFailsWithUnsupportedAndKeepsTheKey} and
 * {@link OverVersion#batchPutAndGetHandleEveryKeyAndBatchRemoveIsUnsupported} check what the store does instead.
 */
class LmStoreContractTest {
    /** Disables the contract cases that need a delete request. */
    static final class NoDeleteInTheProtocol implements ExecutionCondition {
        private static final Set<String> NEED_REMOVE = Set.of("removeReturnsWhetherTheKeyExisted",
                "batchPutGetAndRemoveHandleEveryKey");

        @Override
        public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
            return context.getTestMethod().filter(m -> NEED_REMOVE.contains(m.getName()))
                    .map(m -> ConditionEvaluationResult.disabled("the LMCache protocol has no delete; "
                            + "remove is UNSUPPORTED"))
                    .orElse(ConditionEvaluationResult.enabled("needs no remove"));
        }
    }

    /** The contract over one protocol version. */
    @ExtendWith(NoDeleteInTheProtocol.class)
    abstract static class OverVersion extends KVStoreContract {
        private LmCacheServer server;

        abstract LmProtocolVersion version();

        @Override
        protected KVStore openStore() {
            server = LmCacheServer.builder().protocol(version()).capacityBytes(256L << 20).build().start();
            return KVStores.open("lm://127.0.0.1:" + server.boundPort() + "?protocol=" + version().label());
        }

        @AfterEach
        void stopServer() {
            server.stop();
            assertEquals(0, server.nativeBytesInUse());
        }

        @Test
        void removeFailsWithUnsupportedAndKeepsTheKey() {
            store.put(key("rm"), Segments.random(arena, 10, 8), PutOptions.DEFAULT);
            KVException e = assertThrows(KVException.class, () -> store.remove(key("rm")));
            assertEquals(ErrorCode.UNSUPPORTED, e.code());
            assertTrue(store.exists(key("rm")));
        }

        @Test
        void batchPutAndGetHandleEveryKeyAndBatchRemoveIsUnsupported() {
            String[] keys = {key("b0"), key("b1"), key("absent")};
            var values = new java.lang.foreign.MemorySegment[] {Segments.random(arena, 100, 1),
                    Segments.random(arena, 200, 2), Segments.random(arena, 300, 3)};
            var dsts = new java.lang.foreign.MemorySegment[] {arena.allocate(100), arena.allocate(200),
                    arena.allocate(300)};
            boolean[] stored = new boolean[3];
            store.putBatch(keys, values, 2, PutOptions.DEFAULT, stored);
            assertTrue(stored[0] && stored[1]);
            long[] results = new long[3];
            store.getIntoBatch(keys, dsts, 3, results);
            assertEquals(100, results[0]);
            assertEquals(200, results[1]);
            assertEquals(-1, results[2]);
            assertTrue(Segments.equal(values[1], dsts[1], 200));
            assertEquals(ErrorCode.UNSUPPORTED,
                    assertThrows(KVException.class, () -> store.removeBatch(keys, 2)).code());
        }
    }

    @Nested
    class V0 extends OverVersion {
        @Override
        LmProtocolVersion version() {
            return LmProtocolVersion.V0;
        }
    }

    @Nested
    class V1 extends OverVersion {
        @Override
        LmProtocolVersion version() {
            return LmProtocolVersion.V1;
        }
    }
}
