/**
 * LMCache's remote-store layouts over kvconnector's other stores, so that kvconnector and LMCache instances share
 * one cache: {@code lmcache+valkey://} ({@link dev.kvconnector.lmcache.store.LmValkeyLayoutStore}: LMCache v1's
 * two Redis keys per chunk, or the legacy valkey form) and {@code lmcache+mooncake://}
 * ({@link dev.kvconnector.lmcache.store.LmMooncakeLayoutStore}: metadata and KV bytes in one object under the key
 * string). Values are LMCache chunk objects: a RemoteMetadata followed by the KV bytes.
 */
package dev.kvconnector.lmcache.store;
