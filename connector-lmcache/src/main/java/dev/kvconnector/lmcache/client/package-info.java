/**
 * The {@code lm://} client: {@link dev.kvconnector.lmcache.client.LmConnection} speaks the LMCache server
 * protocol over one TCP connection, and {@link dev.kvconnector.lmcache.client.LmStore} is the pooled
 * {@link dev.kvconnector.store.KVStore} on top of it.
 */
package dev.kvconnector.lmcache.client;
