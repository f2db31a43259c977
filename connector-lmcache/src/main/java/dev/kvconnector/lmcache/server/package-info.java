/**
 * An embeddable LMCache-protocol server ({@link dev.kvconnector.lmcache.server.LmCacheServer}): in-memory,
 * off-heap, capacity-bounded with LRU eviction, one virtual thread per connection.
 */
package dev.kvconnector.lmcache.server;
