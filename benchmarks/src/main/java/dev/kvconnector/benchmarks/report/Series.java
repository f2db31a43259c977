package dev.kvconnector.benchmarks.report;

/**
 * What one benchmark method measures, for grouping and for choosing the floor and the peer it is compared with.
 *
 * @param backend what moved the bytes ({@code memcpy}, {@code socket}, {@code lettuce}, {@code memory: store}, ...)
 * @param op the operation ({@code copy}, {@code put}, {@code get}, {@code insert}, ...)
 * @param domain whether the floor is memory or the network
 * @param direction which floor operation matches
 * @param role floor, peer library, or ours
 * @param perRequest whether one operation moves every layer of a request (the report divides by the layer count)
 */
public record Series(String backend, String op, Domain domain, Direction direction, Role role, boolean perRequest) {

    /** Where the bytes go, which decides the floor. */
    public enum Domain { MEMORY, NETWORK, OTHER }

    /** Which way the bytes go; {@code HAND_OVER}: put by one process and read by another, copied twice. */
    public enum Direction { COPY, PUT, GET, ECHO, HAND_OVER }

    /** Who the series belongs to. */
    public enum Role { FLOOR, PEER, OURS }

    /** The same-working-set floor's backend: one copy of a whole request, memory to memory, from DRAM. */
    public static final String SAME_WORKING_SET_FLOOR = "memcpy request-sized (same-working-set floor)";
    /** The hot floor's backend: one layer copied over and over, from cache. */
    public static final String HOT_FLOOR = "memcpy one layer, hot (hot floor)";

    /** Backend and operation, as the report and the chart's legend print them. */
    public String label() {
        return backend + " " + op;
    }

    /** Classifies a result by its benchmark class and method and its {@code store} parameter. */
    public static Series of(BenchResult r) {
        String m = r.method();
        return switch (r.className()) {
            case "MemcpyBaseline" -> new Series("memcpy", m, Domain.MEMORY, Direction.COPY, Role.FLOOR, false);
            case "SocketBaseline" -> switch (m) {
                case "sendWithAck" -> new Series("socket", "send+ack", Domain.NETWORK, Direction.PUT, Role.FLOOR, false);
                case "fetch" -> new Series("socket", "fetch", Domain.NETWORK, Direction.GET, Role.FLOOR, false);
                default -> new Series("socket", m, Domain.NETWORK, Direction.ECHO, Role.FLOOR, false);
            };
            case "ChronicleBytesBaseline" -> new Series("chronicle-bytes", m, Domain.MEMORY, Direction.COPY, Role.PEER,
                    false);
            case "LettuceBaseline" -> new Series("lettuce", m, Domain.NETWORK, direction(m), Role.PEER, false);
            case "JedisBaseline" -> new Series("jedis", m, Domain.NETWORK, direction(m), Role.PEER, false);
            case "ShmCrossProcessBenchmark" -> switch (m) {
                case "twoCopies" -> new Series("memcpy", "2 copies", Domain.MEMORY, Direction.HAND_OVER, Role.FLOOR,
                        false);
                case "twoCopiesOnTwoCores" -> new Series("memcpy", "2 copies on 2 cores", Domain.MEMORY,
                        Direction.HAND_OVER, Role.PEER, false);
                case "handOff" -> new Series("pipe", "hand-off", Domain.OTHER, Direction.HAND_OVER, Role.FLOOR, false);
                case "putThenPeerDropSelectWokenByPipe" -> new Series("shm: 2 processes",
                        "put+drop-select, peer woken by pipe", Domain.MEMORY, Direction.HAND_OVER, Role.OURS, false);
                case "claimThenPeerViewSelect" -> new Series("shm: 2 processes", "claim+view-select", Domain.MEMORY,
                        Direction.HAND_OVER, Role.OURS, false);
                default -> new Series("shm: 2 processes", "put+drop-select", Domain.MEMORY, Direction.HAND_OVER,
                        Role.OURS, false);
            };
            case "StoreLayerBenchmark" -> ours(r.param("store", "?"), "store", m, false);
            case "ConnectorBenchmark" -> switch (m) {
                // The two floors measured in the connector's own run: an in-memory request is judged against the
                // same-working-set floor, and the hot floor is shown beside it (LatencyTable).
                case "floorSameWorkingSet" -> new Series(SAME_WORKING_SET_FLOOR, "copy", Domain.MEMORY,
                        Direction.COPY, Role.FLOOR, true);
                case "floorHotLayer" -> new Series(HOT_FLOOR, "copy", Domain.MEMORY, Direction.COPY, Role.FLOOR, false);
                case "sameWorkingSetInChunks" -> new Series("memcpy request-sized in 64 KiB pieces", "copy",
                        Domain.MEMORY, Direction.COPY, Role.PEER, true);
                default -> ours(r.param("store", "?"), "paged".equals(r.param("source", "contiguous"))
                        ? "connector paged" : "connector", m, true);
            };
            case "LmChunkBenchmark" -> ours(r.param("lmStore", "lm://"), "chunks", m, true);
            default -> new Series(r.className(), m, Domain.OTHER, direction(m), Role.OURS, false);
        };
    }

    /**
     * One of our stores. The Mooncake test double keeps objects in this process, so its floor is memcpy and its
     * label says "double"; a real Mooncake store is on the network.
     */
    private static Series ours(String uri, String what, String m, boolean perRequest) {
        String scheme = scheme(uri);
        if (scheme.endsWith("mooncake") && (uri.contains("mooncake_store_double") || uri.contains("{mooncake-double}"))) {
            return new Series(scheme + ":// double " + what, m, Domain.MEMORY, direction(m), Role.OURS, perRequest);
        }
        Domain d = scheme.equals("memory") || scheme.equals("shm") ? Domain.MEMORY : Domain.NETWORK;
        String shown = d == Domain.MEMORY ? scheme + ":" : scheme + "://";
        return new Series(shown + " " + what, m, d, direction(m), Role.OURS, perRequest);
    }

    /** The scheme of a store URI template: the text before the first ':'. */
    public static String scheme(String uri) {
        int i = uri.indexOf(':');
        return i < 0 ? uri : uri.substring(0, i);
    }

    private static Direction direction(String method) {
        return switch (method) {
            case "put", "set", "insert", "sendWithAck" -> Direction.PUT;
            case "get", "getInto", "dropSelect", "fetch" -> Direction.GET;
            case "echo" -> Direction.ECHO;
            default -> Direction.COPY;
        };
    }

    /** Whether an operation moves a layer; the control pipe's hand-off moves one byte each way, so has no GB/s. */
    public boolean movesLayer() {
        return !backend.equals("pipe");
    }

    /** Whether this is one of ours on the Valkey wire, which has Lettuce and Jedis as its peers. */
    public boolean speaksRedis() {
        return role == Role.OURS && (backend.startsWith("valkey:") || backend.startsWith("redis:"));
    }
}
