package dev.kvconnector.benchmarks;

import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.server.LmCacheServer;

/**
 * The Java LMCache server ({@code kvctl lmserver}) started in this JVM for one trial, on a free 127.0.0.1 port,
 * protocol v1, and stopped at {@link #close}. In-process like {@link LoopbackPeer}, the raw-socket floor it is
 * compared with: both pay the loopback path and share this JVM's CPUs in the same way.
 */
final class LmServerFixture implements AutoCloseable {
    /** Holds the largest object of a quick or full run (one layer of 4096 tokens, or one request's chunks). */
    static final long CAPACITY_BYTES = 2L << 30;

    private final LmCacheServer server;

    private LmServerFixture(LmCacheServer server) {
        this.server = server;
    }

    /** Starts a server on a free loopback port. */
    static LmServerFixture start() {
        return new LmServerFixture(LmCacheServer.builder().host("127.0.0.1").port(0)
                .protocol(LmProtocolVersion.V1).capacityBytes(CAPACITY_BYTES).build().start());
    }

    /** {@code 127.0.0.1:port}. */
    String hostPort() {
        return "127.0.0.1:" + server.boundPort();
    }

    /** Stops the server and frees what it stored. Idempotent. */
    @Override
    public void close() {
        server.stop();
    }
}
