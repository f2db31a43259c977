package dev.kvconnector.mooncake.te;

/**
 * A message a peer sent with {@code submitTransferWithNotify} or {@code genNotifyInEngine}; it arrives after the
 * bytes that peer submitted before it on the same segment.
 *
 * @param name the name the sender gave (for example a transfer id)
 * @param message the message text
 */
public record Notification(String name, String message) {
}
