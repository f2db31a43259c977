/**
 * Peer-to-peer KV through Mooncake's transfer engine: {@link dev.kvconnector.mooncake.p2p.TransferEngineConnector}
 * is a {@link dev.kvconnector.connector.KVStoreConnector} with no store in between. The decode instance (D)
 * registers its paged cache and publishes, per request, where it wants the KV ({@link
 * dev.kvconnector.mooncake.p2p.P2pDestination}, carried in {@code kv_transfer_params}); the prefill instance (P)
 * writes each layer straight into D's blocks with batched WRITE requests and notifies; D accepts a layer only when
 * the word sum of the bytes in its blocks equals the one P announced.
 */
package dev.kvconnector.mooncake.p2p;
