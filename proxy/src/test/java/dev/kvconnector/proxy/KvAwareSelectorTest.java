package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The kv-aware score, {@code 2 * overlap - load}, as the selector applies it. */
class KvAwareSelectorTest {
    private final KvRouter router = new KvRouter(KvTokenizer.BYTES);
    private final Instance a = new Instance(Role.PREFILL, HostPort.parse("10.0.0.1:8100"));
    private final Instance b = new Instance(Role.PREFILL, HostPort.parse("10.0.0.2:8100"));
    private final Instance c = new Instance(Role.PREFILL, HostPort.parse("10.0.0.3:8100"));
    private final List<Instance> all = List.of(a, b, c);
    private final InstanceSelector kv = InstanceSelector.of(Policy.KV_AWARE, router);

    /** A route of 4 chunks of which publisher {@code p}'s cache holds {@code n[p]}. */
    private KvRoute route(int... n) {
        int[] local = new int[PrefixIndex.MAX_PUBLISHERS];
        System.arraycopy(n, 0, local, 0, n.length);
        return new KvRoute(null, 4, 0, 64, 16, local);
    }

    @Test
    void theLongestCachedPrefixWinsUntilItsLoadOutweighsIt() {
        router.feed(a.name, null);
        router.feed(b.name, null);
        assertSame(b, kv.pick(all, null, 0, route(1, 3))); // a 2, b 6, c 0
        b.outstanding.set(4);
        a.outstanding.set(1);
        assertSame(b, kv.pick(all, null, 0, route(1, 3))); // a 1, b 2, c 0
        b.outstanding.set(7);
        assertSame(a, kv.pick(all, null, 0, route(1, 3))); // a 1, b -1, c 0
        a.outstanding.set(3);
        assertSame(c, kv.pick(all, null, 0, route(1, 3))); // a -1, b -1, c 0: c has no events at all
    }

    @Test
    void triedAndUnhealthyInstancesAreSkippedAndAnUnhashedRouteGoesByLoad() {
        router.feed(a.name, null);
        c.outstanding.set(1);
        assertSame(b, kv.pick(all, List.of(a), 0, route(4))); // a tried; b 0, c -1
        a.eject();
        b.outstanding.set(2);
        assertSame(c, kv.pick(all, null, 0, route(4))); // a unhealthy; b -2, c -1
        assertSame(c, kv.pick(all, null, 0, KvRoute.unhashed(KvMetrics.Reason.NO_TOKENS)));
        assertNull(kv.pick(all, List.of(b, c), 0, route(4)));
    }
}
