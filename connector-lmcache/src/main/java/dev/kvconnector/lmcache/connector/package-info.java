/**
 * {@link dev.kvconnector.lmcache.connector.LmCacheConnectors}: the one connector configured for LMCache chunk
 * objects (LMCache keys, chunk layouts and RemoteMetadata) over any store, with LMCache's longest-prefix lookup,
 * skip-existing inserts and retained entries.
 */
package dev.kvconnector.lmcache.connector;
