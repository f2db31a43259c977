package dev.kvconnector.valkey;

/**
 * A cluster node's MOVED or ASK reply, thrown by a node's {@link ValkeyStore} for {@link ValkeyClusterStore} to
 * follow; it never leaves the cluster store. No stack trace: redirects are routine while slots move.
 */
final class Redirect extends RuntimeException {
    final boolean ask;
    final int slot;
    final String host;
    final int port;

    private Redirect(boolean ask, int slot, String host, int port) {
        super(null, null, false, false);
        this.ask = ask;
        this.slot = slot;
        this.host = host;
        this.port = port;
    }

    /**
     * Parses {@code MOVED 3999 127.0.0.1:6381} or {@code ASK 3999 host:port}; an empty host means the host of the
     * node that answered. Returns null when the text does not parse.
     */
    static Redirect parse(String reply, String answeringHost) {
        String[] parts = reply.split(" ");
        if (parts.length < 3) {
            return null;
        }
        int colon = parts[2].lastIndexOf(':');
        if (colon < 0) {
            return null;
        }
        try {
            int slot = Integer.parseInt(parts[1]);
            int port = Integer.parseInt(parts[2].substring(colon + 1));
            String host = parts[2].substring(0, colon);
            if (slot < 0 || slot >= ClusterSlots.SLOTS || port <= 0 || port > 65535) {
                return null;
            }
            return new Redirect(parts[0].equalsIgnoreCase("ASK"), slot, host.isEmpty() ? answeringHost : host,
                    port);
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
