package dev.kvconnector.events;

import dev.kvconnector.connector.MissReason;

/**
 * One change to where KV lives, as a connector (or a subscriber decoding a publisher's stream) reports it. Every
 * event carries its publisher's {@code epoch}, which changes when the publisher restarts, and a {@code sequence}
 * that grows by one per event within an epoch, so a subscriber sees a gap (a sequence skipped) and a restart (a new
 * epoch). Hashes are lower-case hex, as {@link dev.kvconnector.key.ChunkKeys#hashHex()}.
 */
public sealed interface KvEvent {
    /** The publisher's epoch: differs across its restarts. */
    long epoch();

    /** The event's number within its epoch, from 0, one more per event. */
    long sequence();

    /** The instance that published it (an engine's name, by default {@code pid@host}). */
    String instance();

    /**
     * A chunk's KV became visible in a store or cache.
     *
     * @param storeUri where it is: a store URI ({@code shm:...}, {@code valkey://...}), or an engine's own medium
     *                 without a colon ({@code GPU}, {@code CPU}, as vLLM names them)
     * @param keyScheme the key scheme that named it ({@code kvc-v1}), or null when unknown (decoded from the wire)
     * @param chunkHash the chunk's chained hash
     * @param parentHash the previous chunk's hash; for a request's first chunk the scheme's root
     *                   ({@link dev.kvconnector.key.KvcV1KeyScheme#rootHash}), or null when the scheme has none
     * @param tokens tokens in the chunk
     * @param layers layers stored, or -1 when unknown
     */
    record Stored(long epoch, long sequence, String instance, String storeUri, String keyScheme, String chunkHash,
                  String parentHash, int tokens, int layers) implements KvEvent {
    }

    /** A chunk's KV left {@code storeUri}, for {@code reason}. */
    record Removed(long epoch, long sequence, String instance, String storeUri, String chunkHash,
                   RemovalReason reason) implements KvEvent {
    }

    /**
     * A drop-select found nothing usable in {@code storeUri}: the engine recomputes.
     *
     * @param chunkHash the request's first chunk, the one that could not be loaded, or null for a request of no chunk
     * @param reason why, as the drop-select's result says
     * @param requestedTokens the request's prompt tokens
     */
    record LoadFailed(long epoch, long sequence, String instance, String storeUri, String chunkHash,
                      MissReason reason, int requestedTokens) implements KvEvent {
    }

    /** Everything the publisher reported before is gone (vLLM's AllBlocksCleared; a snapshot starts with it). */
    record AllCleared(long epoch, long sequence, String instance) implements KvEvent {
    }
}
