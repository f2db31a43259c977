/**
 * LMCache's byte formats beside the wire: the v1 {@link dev.kvconnector.lmcache.format.LmRemoteMetadata} header
 * stored next to chunk bytes, and the chunk layouts ({@link dev.kvconnector.lmcache.format.LmChunkFormat}) that
 * per-layer K/V tensors are packed into.
 */
package dev.kvconnector.lmcache.format;
