/**
 * {@link dev.kvconnector.lmcache.connector.LmCacheConnector}: a request's KV as LMCache chunk objects (LMCache
 * keys, chunk layouts and RemoteMetadata) over any store, with LMCache's longest-prefix lookup and a drop-select
 * into a paged cache.
 */
package dev.kvconnector.lmcache.connector;
