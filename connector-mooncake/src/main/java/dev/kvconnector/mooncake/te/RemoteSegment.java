package dev.kvconnector.mooncake.te;

/**
 * A peer's segment opened by {@link TransferEngine#openSegment}.
 *
 * @param name the segment's name ({@code host:port} in P2PHANDSHAKE mode)
 * @param id the engine's id for it, positive
 */
public record RemoteSegment(String name, int id) {
}
