package dev.kvconnector.proxy;

import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Picks one instance of a role for a request. Skips unhealthy instances and those a request already tried,
 * so retries land elsewhere. Allocation-free: it walks the immutable snapshot of the role.
 */
abstract sealed class InstanceSelector {

    static InstanceSelector of(Policy policy) {
        return of(policy, null);
    }

    /** The selector of {@code policy}; {@link Policy#KV_AWARE} reads {@code router}'s publisher numbers. */
    static InstanceSelector of(Policy policy, KvRouter router) {
        return switch (policy) {
            case ROUND_ROBIN -> new RoundRobin();
            case LEAST_OUTSTANDING -> new LeastOutstanding();
            case PREFIX_AFFINITY -> new PrefixAffinity();
            case KV_AWARE -> new KvAware(router);
        };
    }

    /**
     * {@link #pick(List, List, long)} with what the prefix index says about the request; only {@link KvAware} reads
     * {@code route}.
     */
    Instance pick(List<Instance> instances, List<Instance> tried, long affinity, KvRoute route) {
        return pick(instances, tried, affinity);
    }

    /**
     * Returns the chosen instance, or null when none is healthy and untried.
     *
     * @param instances the role's snapshot
     * @param tried     instances this request already tried (or null), at most a few
     * @param affinity  hash of the prompt prefix, used by prefix affinity only
     */
    abstract Instance pick(List<Instance> instances, List<Instance> tried, long affinity);

    static boolean eligible(Instance i, List<Instance> tried) {
        return i.healthy() && (tried == null || !tried.contains(i));
    }

    static final class RoundRobin extends InstanceSelector {
        private final AtomicLong next = new AtomicLong();

        @Override
        Instance pick(List<Instance> instances, List<Instance> tried, long affinity) {
            int n = instances.size();
            if (n == 0) {
                return null;
            }
            // The counter is taken modulo the current size, so adding or removing an instance needs no rebuild.
            int start = (int) Math.floorMod(next.getAndIncrement(), (long) n);
            for (int k = 0; k < n; k++) {
                Instance i = instances.get((start + k) % n);
                if (eligible(i, tried)) {
                    return i;
                }
            }
            return null;
        }
    }

    static final class LeastOutstanding extends InstanceSelector {
        private final AtomicLong next = new AtomicLong();

        @Override
        Instance pick(List<Instance> instances, List<Instance> tried, long affinity) {
            int n = instances.size();
            if (n == 0) {
                return null;
            }
            int start = (int) Math.floorMod(next.getAndIncrement(), (long) n);
            Instance best = null;
            int bestLoad = Integer.MAX_VALUE;
            for (int k = 0; k < n; k++) {
                Instance i = instances.get((start + k) % n);
                int load = i.outstanding.get();
                if (load < bestLoad && eligible(i, tried)) {
                    best = i;
                    bestLoad = load;
                }
            }
            return best;
        }
    }

    /** Rendezvous (highest random weight) hashing: losing an instance moves only the prompts it had. */
    static final class PrefixAffinity extends InstanceSelector {
        @Override
        Instance pick(List<Instance> instances, List<Instance> tried, long affinity) {
            Instance best = null;
            long bestWeight = Long.MIN_VALUE;
            for (int k = 0, n = instances.size(); k < n; k++) {
                Instance i = instances.get(k);
                long weight = Hashing.mix(affinity ^ i.seed);
                if ((best == null || weight > bestWeight) && eligible(i, tried)) {
                    best = i;
                    bestWeight = weight;
                }
            }
            return best;
        }
    }

    /** {@link Policy#KV_AWARE}: {@code 2 * overlap - load}, ties round robin; without a route, least outstanding. */
    static final class KvAware extends InstanceSelector {
        private final AtomicLong next = new AtomicLong();
        private final KvRouter router;
        private final LeastOutstanding unrouted = new LeastOutstanding();

        KvAware(KvRouter router) {
            this.router = router;
        }

        @Override
        Instance pick(List<Instance> instances, List<Instance> tried, long affinity) {
            return unrouted.pick(instances, tried, affinity);
        }

        @Override
        Instance pick(List<Instance> instances, List<Instance> tried, long affinity, KvRoute route) {
            if (route == null || route.unhashed != null) {
                return unrouted.pick(instances, tried, affinity);
            }
            int n = instances.size();
            if (n == 0) {
                return null;
            }
            int start = (int) Math.floorMod(next.getAndIncrement(), (long) n);
            Instance best = null;
            long bestScore = Long.MIN_VALUE;
            for (int k = 0; k < n; k++) {
                Instance i = instances.get((start + k) % n);
                long score = 2L * route.overlap(router.publisher(i)) - i.outstanding.get();
                if (score > bestScore && eligible(i, tried)) {
                    best = i;
                    bestScore = score;
                }
            }
            return best;
        }
    }
}
