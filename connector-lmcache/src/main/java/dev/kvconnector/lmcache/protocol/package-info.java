/**
 * The LMCache server wire protocol, in its 2024 form ({@link dev.kvconnector.lmcache.protocol.LmProtocolVersion#V0})
 * and its {@code lmcache.v1} form ({@link dev.kvconnector.lmcache.protocol.LmProtocolVersion#V1}): fixed-size
 * headers of int32 little-endian fields and a 150-byte space-padded key, followed by raw payload bytes.
 *
 * <p>Only headers pass through these classes; payloads move between sockets and the caller's
 * {@link java.lang.foreign.MemorySegment}s without a copy here.
 */
package dev.kvconnector.lmcache.protocol;
