package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

/**
 * Staging for a drop-select, with back-pressure as a result: a full pool makes the drop-select wait for others to
 * give theirs back, up to the layer timeout, and then a {@code TIMED_OUT} miss that names the pool, rather than an
 * exception from the engine's load.
 */
final class DropStaging {
    private DropStaging() {
    }

    /** A lease of {@code bytes} from the connector's staging, or null when the pool stayed full. */
    static MemorySegment acquire(StoreConnector connector, long bytes) {
        return connector.staging().tryAcquire(bytes, TimeUnit.MILLISECONDS.toNanos(connector.layerTimeoutMillis()));
    }

    /** The miss for {@code bytes} of staging that {@link #acquire} could not lease. */
    static DropResult full(StoreConnector connector, int requestedTokens, long bytes) {
        return DropResult.miss(requestedTokens, MissReason.TIMED_OUT, connector.staging().describeNoRoom(bytes)
                + " for " + connector.layerTimeoutMillis() + " ms: other drop-selects and puts held it; raise "
                + "stagingBytes or run fewer transfers at once");
    }
}
