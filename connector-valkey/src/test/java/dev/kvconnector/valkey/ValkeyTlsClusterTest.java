package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.valkey.testing.RedisCluster;
import dev.kvconnector.valkey.testing.Segments;
import dev.kvconnector.valkey.testing.TestCertificates;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * {@code valkeys+cluster://} and {@code rediss+cluster://} against a real 3-master cluster with TLS for clients,
 * the cluster bus and replication ({@code tls-cluster yes}) and a throwaway CA. Over TLS, CLUSTER SLOTS names the
 * nodes' TLS ports, so every master is reached over TLS.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ValkeyTlsClusterTest {
    private TestCertificates certs;
    private RedisCluster cluster;

    @BeforeAll
    void start() {
        certs = TestCertificates.generate();
        cluster = RedisCluster.start(3, 0, certs, 5000);
    }

    @AfterAll
    void stop() {
        try {
            if (cluster != null) {
                cluster.close();
            }
        } finally {
            if (certs != null) {
                certs.delete();
            }
        }
    }

    @Test
    void keysOnEveryMasterRoundTripOverTls() {
        for (String scheme : new String[] {"valkeys+cluster", "rediss+cluster"}) {
            String uri = scheme + "://127.0.0.1:" + cluster.clientPort(1) + "?pool=2&tls-ca=" + certs.caPem();
            try (KVStore store = KVStores.open(uri); Arena arena = Arena.ofConfined()) {
                Set<Integer> slots = new HashSet<>();
                for (int i = 0; i < 30; i++) {
                    String k = scheme + ":" + i;
                    MemorySegment v = Segments.random(arena, 20_000 + i, "+-:$*%_,#!=(|~>".charAt(i % 15), i);
                    assertTrue(store.put(k, v, PutOptions.DEFAULT));
                    MemorySegment dst = Segments.zeroed(arena, v.byteSize());
                    assertEquals(v.byteSize(), store.getInto(k, dst), k);
                    assertEquals(-1, Segments.mismatch(v, dst, v.byteSize()), k);
                    slots.add(ClusterSlots.slot(k) * 3 / ClusterSlots.SLOTS);
                }
                assertEquals(3, slots.size(), "30 keys spread over the thirds of the slot space, so over 3 masters");
                String health = store.healthCheck();
                assertTrue(health.contains("3 masters") && health.contains("16384 of 16384 slots covered"), health);
            }
        }
    }

    @Test
    void untrustedCertificateFailsOpenWithATlsHint() {
        KVException e = assertThrows(KVException.class, () -> KVStores.open("valkeys+cluster://127.0.0.1:"
                + cluster.clientPort(0) + "?tls-ca=" + certs.otherCaPem()));
        assertEquals(ErrorCode.INVALID_CONFIG, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("TLS handshake with 127.0.0.1:" + cluster.clientPort(0)), e.getMessage());
    }
}
