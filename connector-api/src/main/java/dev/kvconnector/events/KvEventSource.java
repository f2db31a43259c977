package dev.kvconnector.events;

/**
 * Who publishes a stream of events and how its chunks hash, so a router can compute a prompt's chunk hashes the way
 * the publisher's engine does.
 *
 * @param instance the publishing instance's name
 * @param epoch the publisher's epoch (see {@link KvEvent#epoch()})
 * @param storeUri the store the connector writes to
 * @param keyScheme the key scheme's name
 * @param chunkTokens tokens per chunk
 * @param rootHash the hex seed of the scheme's hash chains for requests without a namespace
 *                 ({@link dev.kvconnector.key.KvcV1KeyScheme#rootHash}), or null when the scheme has none
 */
public record KvEventSource(String instance, long epoch, String storeUri, String keyScheme, int chunkTokens,
                            String rootHash) {
}
