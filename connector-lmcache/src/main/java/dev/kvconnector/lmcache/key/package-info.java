/**
 * Every LMCache key format: LMCache 2024 keys ({@link dev.kvconnector.lmcache.key.LmcacheV0KeyScheme},
 * {@code lmcache-v0}) and v1 keys ({@link dev.kvconnector.lmcache.key.LmcacheV1Keys},
 * {@link dev.kvconnector.lmcache.key.LmcacheV1KeyScheme}, {@code lmcache-v1}), with what the two share in one place:
 * the chunks, their chained hashes and the refusals ({@link dev.kvconnector.lmcache.key.LmcacheKeyScheme}), and the
 * rules of the parts both keys hold ({@code LmcacheKeyParts}).
 */
package dev.kvconnector.lmcache.key;
