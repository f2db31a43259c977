package dev.kvconnector.valkey.resp;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;

/**
 * The server one connection talks to, and the masked store URI that errors name. Builds the exceptions of the
 * RESP layer, so that every one of them names host:port, the operation and the key in flight.
 *
 * @param host the server's host name or address
 * @param port the server's TCP port
 * @param maskedUri the store URI with secrets masked, for messages
 */
public record Endpoint(String host, int port, String maskedUri) {

    /** {@code host:port}, for messages. */
    public String hostPort() {
        return host + ":" + port;
    }

    /** A reply that breaks RESP, or breaks one of our limits. */
    KVException protocolError(InFlight f, String detail) {
        return KVException.of(ErrorCode.PROTOCOL_ERROR, hostPort() + " sent a reply that breaks RESP: " + detail)
                .store(maskedUri).operation(f.operation()).key(f.key())
                .hint("check that " + hostPort() + " is a Valkey or Redis server (not TLS-only, not another "
                        + "protocol); raise max-reply= if values are legitimately larger")
                .build();
    }

    /** The server closed the connection while a reply was expected. */
    KVException closedByPeer(InFlight f, String detail) {
        if (f.timedOut()) {
            return timeout(f, null);
        }
        return KVException.of(ErrorCode.STORE_UNREACHABLE, hostPort() + " closed the connection " + detail)
                .store(maskedUri).operation(f.operation()).key(f.key())
                .hint("the server restarted, crashed, or dropped the client (client-output-buffer-limit, timeout "
                        + "setting, maxclients); the connection was discarded and the next call reconnects")
                .build();
    }

    /** A socket failure; a failure caused by the watchdog closing the channel is a timeout. */
    KVException ioFailure(InFlight f, IOException e) {
        if (f.timedOut()) {
            return timeout(f, e);
        }
        return KVException.of(ErrorCode.STORE_UNREACHABLE, "connection to " + hostPort() + " failed: " + e)
                .store(maskedUri).operation(f.operation()).key(f.key()).cause(e)
                .hint("is the server at " + hostPort() + " running? the connection was discarded and the next "
                        + "call reconnects")
                .build();
    }

    private KVException timeout(InFlight f, IOException cause) {
        return KVException.of(ErrorCode.TIMEOUT, hostPort() + " made no progress for " + f.timeoutMillis()
                        + " ms")
                .store(maskedUri).operation(f.operation()).key(f.key()).cause(cause)
                .hint("the server is paused, overloaded or blocked (a slow command, a fork for a snapshot), or the "
                        + "network stalled; raise timeout= if large values need longer")
                .build();
    }
}
