package dev.kvconnector.valkey;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.StoreRead;
import dev.kvconnector.store.StoreSubscription;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.valkey.resp.RespReader;
import dev.kvconnector.valkey.resp.RespSettings;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link KVStore} on a Valkey or Redis cluster: {@code valkey+cluster://host1:port1,host2:port2,...?options}
 * (any reachable subset of the nodes; the options are those of {@link ValkeyStore}).
 *
 * <p>Each key goes to the master that owns its slot (see {@link ClusterSlots}; put a hash tag such as
 * {@code {req-42}:L07} in keys that should live together). The slot map comes from CLUSTER SLOTS at open. A MOVED
 * reply reloads the map and retries on the new owner; an ASK reply (a slot being migrated) retries once on the
 * named node after ASKING, without touching the map. When a master cannot be reached (connection refused or lost,
 * or no progress for the timeout), the map is reloaded from the other nodes: if a replica took over the slot, the
 * call goes on there; if the cluster still names the dead master, the call fails with STORE_UNREACHABLE saying so
 * (a failover takes about cluster-node-timeout). At most {@value #MAX_REDIRECTS} redirects and failovers per call.
 * {@code valkeys+cluster://} is the same over TLS, with the TLS options of {@link ValkeyStore}.
 *
 * <p>Each master gets its own connection pool. Batch puts and gets are pipelined per master (see
 * {@link #putBatch}); batch removes go key by key.
 *
 * <p>Over 400 lines because every store operation needs the same routing by slot, the same MOVED and ASK handling
 * and, for batches, the same grouping by master; apart, each operation would repeat them.
 */
public final class ValkeyClusterStore implements KVStore {
    private static final Logger LOG = LoggerFactory.getLogger(ValkeyClusterStore.class);
    private static final int MAX_REDIRECTS = 5;

    private final StoreUri uri;
    private final RespSettings settings;
    private final Map<String, ValkeyStore> nodes = new ConcurrentHashMap<>();
    private final Object refreshLock = new Object();
    private volatile ValkeyStore[] owners = new ValkeyStore[ClusterSlots.SLOTS];
    private volatile boolean closed;

    private ValkeyClusterStore(StoreUri uri, RespSettings settings) {
        this.uri = uri;
        this.settings = settings;
    }

    /** Opens the store: connects to the first reachable seed node and loads the slot map. */
    public static ValkeyClusterStore open(StoreUri uri) {
        if (!uri.path().isEmpty() && !uri.path().equals("/") && !uri.path().equals("/0")) {
            throw KVException.of(ErrorCode.INVALID_URI, "a cluster has only database 0, not '" + uri.path() + "'")
                    .store(uri.masked()).operation("open").build();
        }
        if (uri.hosts().isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_URI, "no seed node: valkey+cluster://host1:port1,host2:port2")
                    .store(uri.masked()).operation("open").build();
        }
        ValkeyClusterStore store = new ValkeyClusterStore(uri, ValkeyStore.settings(uri, 0));
        try {
            store.refresh(null);
        } catch (RuntimeException e) {
            store.close();
            throw e;
        }
        return store;
    }

    /** Reloads the slot map from {@code via}, else from any known node, else from the seeds. */
    private void refresh(ValkeyStore via) {
        refresh(via, null);
    }

    /**
     * Reloads the slot map from {@code via}, else from any known node, else from the seeds; a node in
     * {@code unreachable} is asked last, so that a dead master's connect attempts come only when no other node
     * answers.
     */
    private void refresh(ValkeyStore via, ValkeyStore unreachable) {
        synchronized (refreshLock) {
            List<ValkeyStore> candidates = new ArrayList<>();
            if (via != null) {
                candidates.add(via);
            }
            for (ValkeyStore n : nodes.values()) {
                if (n != via && n != unreachable) {
                    candidates.add(n);
                }
            }
            if (unreachable != null) {
                candidates.add(unreachable);
            }
            KVException last = null;
            for (ValkeyStore c : candidates) {
                try {
                    load(c.clusterSlots(), c.endpoint().host());
                    return;
                } catch (KVException e) {
                    last = e;
                }
            }
            for (StoreUri.HostPort seed : uri.hosts()) {
                try {
                    ValkeyStore s = node(seed.host(), seed.port() < 0 ? ValkeyStore.DEFAULT_PORT : seed.port());
                    load(s.clusterSlots(), seed.host());
                    return;
                } catch (KVException e) {
                    last = e;
                }
            }
            throw KVException.of(last == null ? ErrorCode.STORE_UNREACHABLE : last.code(),
                            "no node of the cluster answered CLUSTER SLOTS" + (last == null ? ""
                                    : ": " + last.getMessage()))
                    .store(uri.masked()).operation("refresh").cause(last)
                    .hint("check that the seed nodes in the URI are up and run with cluster-enabled yes")
                    .build();
        }
    }

    private void load(List<Object> slots, String answeringHost) {
        ValkeyStore[] next = new ValkeyStore[ClusterSlots.SLOTS];
        for (Object range : slots) {
            if (!(range instanceof List<?> r) || r.size() < 3 || !(r.get(0) instanceof Long first)
                    || !(r.get(1) instanceof Long last) || !(r.get(2) instanceof List<?> master)
                    || master.size() < 2 || !(master.get(1) instanceof Long port)) {
                throw KVException.of(ErrorCode.PROTOCOL_ERROR, "a CLUSTER SLOTS entry of an unexpected shape: "
                        + range).store(uri.masked()).operation("refresh").build();
            }
            String host = master.get(0) instanceof String h && !h.isEmpty() && !h.equals("?") ? h : answeringHost;
            if (first < 0 || last >= ClusterSlots.SLOTS || first > last) {
                throw KVException.of(ErrorCode.PROTOCOL_ERROR, "a CLUSTER SLOTS range " + first + "-" + last
                        + " outside 0-16383").store(uri.masked()).operation("refresh").build();
            }
            ValkeyStore owner = node(host, port.intValue());
            for (long s = first; s <= last; s++) {
                next[(int) s] = owner;
            }
        }
        owners = next;
    }

    private ValkeyStore node(String host, int port) {
        String id = host + ":" + port;
        ValkeyStore s = nodes.get(id);
        if (s == null) {
            s = nodes.computeIfAbsent(id, k -> ValkeyStore.openNode(uri, host, port, settings, true));
        }
        return s;
    }

    private ValkeyStore owner(String op, String key) {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the store was closed").store(uri.masked()).operation(op)
                    .key(key).build();
        }
        if (key == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the key is null").store(uri.masked()).operation(op)
                    .build();
        }
        int slot = ClusterSlots.slot(key);
        ValkeyStore s = owners[slot];
        if (s == null) {
            throw KVException.of(ErrorCode.STORE_ERROR, "no master serves slot " + slot + " of the key")
                    .store(uri.masked()).operation(op).key(key)
                    .hint("the cluster is incomplete: check CLUSTER INFO (cluster_state, cluster_slots_assigned)")
                    .build();
        }
        return s;
    }

    private static final int PUT = 0;
    private static final int GET = 1;
    private static final int SIZE = 2;
    private static final int REMOVE = 3;
    private static final String[] OP_NAMES = {"put", "get", "size", "remove"};

    /**
     * Runs one single-key operation on the key's owner, following MOVED and ASK redirects. A switch rather than a
     * lambda per call keeps the routed path free of allocation.
     */
    private long route(int op, String key, MemorySegment segment, PutOptions options) {
        ValkeyStore target = owner(OP_NAMES[op], key);
        boolean ask = false;
        for (int redirects = 0; ; redirects++) {
            boolean asking = ask;
            if (asking) {
                ClusterAsking.set(true);
            }
            try {
                return switch (op) {
                    case PUT -> target.put(key, segment, options) ? 1 : 0;
                    case GET -> target.getInto(key, segment);
                    case SIZE -> target.size(key);
                    default -> target.remove(key) ? 1 : 0;
                };
            } catch (KVException e) {
                if (redirects == MAX_REDIRECTS) {
                    throw e;
                }
                target = ownerAfterFailure(e, target, ClusterSlots.slot(key), OP_NAMES[op], key);
                ask = false;
            } catch (Redirect r) {
                if (redirects == MAX_REDIRECTS) {
                    throw KVException.of(ErrorCode.STORE_ERROR, "more than " + MAX_REDIRECTS + " redirects for "
                                    + "slot " + r.slot + ", last to " + r.host + ":" + r.port)
                            .store(uri.masked()).operation(OP_NAMES[op]).key(key)
                            .hint("the cluster is resharding or its nodes disagree; retry later").build();
                }
                LOG.debug("{} {} -> {}:{} for slot {}", r.ask ? "ASK" : "MOVED", key, r.host, r.port, r.slot);
                ValkeyStore from = target;
                target = node(r.host, r.port);
                ask = r.ask;
                if (!r.ask) {
                    refresh(target);
                    if (owners[r.slot] == from) {
                        // The reloaded map still names the old owner: trust the redirect for this slot.
                        owners[r.slot] = target;
                    }
                }
            } finally {
                if (asking) {
                    ClusterAsking.set(false);
                }
            }
        }
    }

    /**
     * After {@code failed} could not be reached for {@code slot}: reloads the slot map from the other nodes and
     * returns the slot's new owner, so that the call follows a failover (a replica promoted in place of a dead
     * master). Rethrows {@code e} when it is not a connection failure, and throws a STORE_UNREACHABLE that says
     * so when the cluster still maps the slot to the unreachable master (the failover has not happened yet, or
     * the master has no replica).
     */
    private ValkeyStore ownerAfterFailure(KVException e, ValkeyStore failed, int slot, String op, String key) {
        if (e.code() != ErrorCode.STORE_UNREACHABLE && e.code() != ErrorCode.TIMEOUT) {
            throw e;
        }
        try {
            refresh(null, failed);
        } catch (KVException refreshFailed) {
            e.addSuppressed(refreshFailed);
            throw e;
        }
        ValkeyStore now = owners[slot];
        if (now != null && now != failed) {
            LOG.info("slot {} moved from unreachable {} to {}: following the failover", slot,
                    failed.endpoint().hostPort(), now.endpoint().hostPort());
            return now;
        }
        throw KVException.of(e.code(), "the master of slot " + slot + ", " + failed.endpoint().hostPort()
                        + ", is unreachable and the cluster still maps the slot to it (" + e.getMessage() + ")")
                .store(uri.masked()).operation(op).key(key).cause(e)
                .hint("a replica takes over after cluster-node-timeout when the master has one; retry after that, "
                        + "and check CLUSTER NODES for a failed master without replicas")
                .build();
    }

    @Override
    public String uri() {
        return uri.masked();
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return EnumSet.of(StoreCapability.NATIVE_TTL, StoreCapability.BATCH, StoreCapability.SHARED_ACROSS_PROCESSES,
                StoreCapability.REMOVE, StoreCapability.PIPELINED_READ);
    }

    /**
     * Not supported: a cluster's keyspace notifications are per node, told only to clients of the node whose slot
     * changed, and following the masters through failovers and slot migrations is not built. {@code EVENTS} is not
     * declared, so a connector does not ask.
     *
     * @throws KVException {@code UNSUPPORTED}, saying so and what to do instead
     */
    @Override
    public StoreSubscription subscribe(StoreEventListener listener, ErrorHandler errors) {
        throw KVException.of(ErrorCode.UNSUPPORTED, "valkey+cluster:// does not subscribe to keyspace "
                        + "notifications: a cluster tells them per node, and following its masters through failovers "
                        + "is not built").store(uri.masked()).operation("subscribe")
                .hint("subscribe to each master with valkey://host:port (the events of the slots it holds), or run "
                        + "without store events; a KV index then learns of evictions as misses").build();
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        return route(PUT, key, value, options) == 1;
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        return route(GET, key, dst, null);
    }

    @Override
    public long size(String key) {
        return route(SIZE, key, null, null);
    }

    @Override
    public boolean remove(String key) {
        return route(REMOVE, key, null, null) == 1;
    }

    /**
     * Pipelines the puts per master: one node batch when every key lives on one master (the hash-tag case, which
     * allocates nothing), else one per master. Keys that a node redirected are put again one by one, following
     * the redirect; a key not stored by an if-absent put is put again and still reports false.
     */
    @Override
    public void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        checkBatch("putBatch", keys, count, values.length, stored.length);
        ValkeyStore single = singleOwner("putBatch", keys, count);
        if (single != null) {
            try {
                single.putBatch(keys, values, count, options, stored);
            } catch (Redirect | KVException r) {
                if (r instanceof KVException e) {
                    ownerAfterFailure(e, single, ClusterSlots.slot(keys[0]), "putBatch", keys[0]);
                }
                for (int i = 0; i < count; i++) {
                    if (!stored[i] || r instanceof KVException) {
                        stored[i] = route(PUT, keys[i], values[i], options) == 1;
                    }
                }
            }
            return;
        }
        for (Map.Entry<ValkeyStore, List<Integer>> g : groupByOwner("putBatch", keys, count).entrySet()) {
            List<Integer> idx = g.getValue();
            int n = idx.size();
            String[] k = new String[n];
            MemorySegment[] v = new MemorySegment[n];
            boolean[] st = new boolean[n];
            for (int j = 0; j < n; j++) {
                k[j] = keys[idx.get(j)];
                v[j] = values[idx.get(j)];
            }
            boolean redirected = false;
            try {
                g.getKey().putBatch(k, v, n, options, st);
            } catch (Redirect r) {
                redirected = true;
            } catch (KVException e) {
                ownerAfterFailure(e, g.getKey(), ClusterSlots.slot(k[0]), "putBatch", k[0]);
                redirected = true;
                Arrays.fill(st, false);
            }
            for (int j = 0; j < n; j++) {
                stored[idx.get(j)] = st[j] || redirected && route(PUT, k[j], v[j], options) == 1;
            }
        }
    }

    /** Pipelines the gets per master, as {@link #putBatch} does; redirected keys are read again one by one. */
    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        checkBatch("getIntoBatch", keys, count, dsts.length, results.length);
        ValkeyStore single = singleOwner("getIntoBatch", keys, count);
        if (single != null) {
            try {
                single.getIntoBatch(keys, dsts, count, results);
            } catch (Redirect | KVException r) {
                readAgain(r, single, keys, dsts, count, results);
            }
            return;
        }
        for (Map.Entry<ValkeyStore, List<Integer>> g : groupByOwner("getIntoBatch", keys, count).entrySet()) {
            List<Integer> idx = g.getValue();
            int n = idx.size();
            String[] k = new String[n];
            MemorySegment[] d = new MemorySegment[n];
            long[] res = new long[n];
            for (int j = 0; j < n; j++) {
                k[j] = keys[idx.get(j)];
                d[j] = dsts[idx.get(j)];
            }
            try {
                g.getKey().getIntoBatch(k, d, n, res);
            } catch (Redirect | KVException r) {
                if (r instanceof KVException e) {
                    ownerAfterFailure(e, g.getKey(), ClusterSlots.slot(k[0]), "getIntoBatch", k[0]);
                }
                for (int j = 0; j < n; j++) {
                    if (res[j] == RespReader.REPLY_ERROR || r instanceof KVException) {
                        res[j] = route(GET, k[j], d[j], null);
                    }
                }
            }
            for (int j = 0; j < n; j++) {
                results[idx.get(j)] = res[j];
            }
        }
    }

    /**
     * After a batch read of {@code owner} failed with {@code r}: follows a failover (an unreachable master), then
     * reads each key again on its own route, all of them after a failure, those answered with an error after
     * redirects.
     */
    private void readAgain(RuntimeException r, ValkeyStore owner, String[] keys, MemorySegment[] dsts, int count,
                           long[] results) {
        if (r instanceof KVException e) {
            ownerAfterFailure(e, owner, ClusterSlots.slot(keys[0]), "getIntoBatch", keys[0]);
        }
        for (int i = 0; i < count; i++) {
            if (results[i] == RespReader.REPLY_ERROR || r instanceof KVException) {
                results[i] = route(GET, keys[i], dsts[i], null);
            }
        }
    }

    @Override
    public StoreRead newRead() {
        return new ClusterRead();
    }

    /**
     * {@inheritDoc} A batch whose keys one master owns (a request's hash-tagged keys) is sent to that master now; a
     * batch over several masters, or one that could not be sent, is read at the await by {@link #getIntoBatch}, with
     * its redirects and failover.
     */
    @Override
    public void sendGetIntoBatch(String[] keys, MemorySegment[] dsts, int count, StoreRead read) {
        ClusterRead r = (ClusterRead) SentBatch.free(read, this);
        checkBatch("getIntoBatch", keys, count, dsts.length, count);
        ValkeyStore single = count > 0 ? singleOwner("getIntoBatch", keys, count) : null;
        r.owner = single;
        r.sentTo = null;
        if (single != null) {
            StoreRead inner = r.on(single);
            try {
                single.sendGetIntoBatch(keys, dsts, count, inner);
                r.sentTo = inner;
            } catch (KVException e) {
                LOG.debug("sending a read to {} failed ({}); reading it at the await", single.endpoint().hostPort(),
                        e.getMessage());
            }
        }
        r.sent(keys, dsts, count);
    }

    /** A batch sent to the one master that owns its keys, or kept to be read at the await. */
    private final class ClusterRead extends SentBatch {
        private final Map<ValkeyStore, StoreRead> perMaster = new LinkedHashMap<>();
        private ValkeyStore owner;
        private StoreRead sentTo;

        ClusterRead() {
            super(ValkeyClusterStore.this);
        }

        StoreRead on(ValkeyStore master) {
            return perMaster.computeIfAbsent(master, ValkeyStore::newRead);
        }

        @Override
        void read(long[] results) {
            StoreRead inner = sentTo;
            sentTo = null;
            if (inner == null) {
                getIntoBatch(keys, dsts, count, results);
                return;
            }
            try {
                inner.await(results);
            } catch (Redirect | KVException r) {
                readAgain(r, owner, keys, dsts, count, results);
            }
        }
    }

    private void checkBatch(String op, String[] keys, int count, int valuesLength, int resultsLength) {
        if (count < 0 || count > keys.length || count > valuesLength || count > resultsLength) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "count " + count + " is negative or exceeds an array"
                            + " (keys " + keys.length + ", values " + valuesLength + ", results " + resultsLength
                            + ")")
                    .store(uri.masked()).operation(op).build();
        }
    }

    /** The one master that owns every key, or null when they spread over several (or count is 0). */
    private ValkeyStore singleOwner(String op, String[] keys, int count) {
        ValkeyStore first = null;
        for (int i = 0; i < count; i++) {
            ValkeyStore o = owner(op, keys[i]);
            if (first == null) {
                first = o;
            } else if (o != first) {
                return null;
            }
        }
        return first;
    }

    private Map<ValkeyStore, List<Integer>> groupByOwner(String op, String[] keys, int count) {
        Map<ValkeyStore, List<Integer>> groups = new LinkedHashMap<>();
        for (int i = 0; i < count; i++) {
            groups.computeIfAbsent(owner(op, keys[i]), o -> new ArrayList<>()).add(i);
        }
        return groups;
    }

    /** PING and INFO on every master that owns slots; names each. */
    @Override
    public String healthCheck() {
        int covered = 0;
        Set<ValkeyStore> masters = new LinkedHashSet<>();
        for (ValkeyStore owner : owners) {
            if (owner != null) {
                covered++;
                masters.add(owner);
            }
        }
        StringBuilder b = new StringBuilder(uri.masked()).append(": ").append(masters.size()).append(" masters, ")
                .append(covered).append(" of ").append(owners.length).append(" slots covered");
        if (covered < owners.length) {
            b.append(" (WARNING: keys in uncovered slots fail; check CLUSTER SLOTS and the cluster's state)");
        }
        for (ValkeyStore n : masters) {
            b.append("; ").append(n.healthCheck());
        }
        return b.toString();
    }

    @Override
    public void close() {
        closed = true;
        for (ValkeyStore n : nodes.values()) {
            n.close();
        }
    }

    @Override
    public String toString() {
        return "ValkeyClusterStore[" + uri.masked() + "]";
    }
}
