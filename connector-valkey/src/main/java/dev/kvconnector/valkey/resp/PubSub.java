package dev.kvconnector.valkey.resp;

import java.util.List;
import java.util.Map;

/**
 * One connection in subscribed mode ({@code SUBSCRIBE}), of its own, outside any pool: it waits for messages as long
 * as there are none, so no watchdog times it out. It speaks RESP2 whatever the store negotiates, because in RESP3 a
 * message is a push frame, which the reader skips between replies; in RESP2 it is a plain array. Used by one thread;
 * {@link #close()} may come from another, and wakes a {@link #next()} blocked on the socket.
 */
public final class PubSub implements AutoCloseable {
    private static final byte[] SUBSCRIBE = RespWriter.token("SUBSCRIBE");
    private static final byte[] CONFIG = RespWriter.token("CONFIG");
    private static final byte[] GET = RespWriter.token("GET");

    private final RespConnection connection;

    /** An unconnected subscriber to the server {@code endpoint}, with {@code settings} but RESP2. */
    public PubSub(Endpoint endpoint, RespSettings settings) {
        this.connection = new RespConnection(endpoint, new RespSettings(settings.user(), settings.password(),
                settings.database(), 2, settings.timeoutMillis(), settings.connectTimeoutMillis(), 1,
                settings.maxReplyBytes(), settings.maxElements(), settings.bufferBytes(), settings.tls(),
                settings.verifyHostname()));
    }

    /**
     * Connects (handshake, AUTH, SELECT) and reads one server setting with {@code CONFIG GET}, before subscribing.
     *
     * @return the setting's value, or null when the server refused CONFIG (an ACL without it)
     * @throws dev.kvconnector.error.KVException as a pooled connection's connect does
     */
    public String connectAndRead(String setting) {
        connection.connect(1);
        connection.writer().array(3).raw(CONFIG).raw(GET).bulk(setting).flush();
        Map<String, String> reply = connection.reader().readStringMap();
        return reply == null ? null : reply.get(setting);
    }

    /** Subscribes to {@code channels} and reads the server's confirmation of each. */
    public void subscribe(List<String> channels) {
        connection.writer().array(1 + channels.size()).raw(SUBSCRIBE);
        for (String c : channels) {
            connection.writer().bulk(c);
        }
        connection.writer().flush();
        for (int i = 0; i < channels.size(); i++) {
            connection.reader().readTree();
        }
    }

    /**
     * Waits for the next message.
     *
     * @return its channel and payload, or null for anything else the server sends in subscribed mode
     * @throws dev.kvconnector.error.KVException {@code STORE_UNREACHABLE} when the connection is lost or closed
     */
    public String[] next() {
        Object reply = connection.reader().readTree();
        if (reply instanceof List<?> l && l.size() == 3 && "message".equals(l.get(0))
                && l.get(1) instanceof String channel && l.get(2) instanceof String payload) {
            return new String[] {channel, payload};
        }
        return null;
    }

    /** Closes the socket; a {@link #next()} blocked on it fails at once. */
    @Override
    public void close() {
        connection.close();
    }
}
