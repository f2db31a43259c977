package dev.kvconnector.valkey.resp;

import javax.net.ssl.SSLContext;

/**
 * Settings of a RESP client, validated by whoever builds them (the store, from its URI).
 *
 * @param user ACL user name, or null for the default user
 * @param password password, or null for none; never logged
 * @param database the database to SELECT (0 needs no SELECT)
 * @param protocol 2 or 3 to force a protocol; 0 to try RESP3 and fall back to RESP2
 * @param timeoutMillis how long an operation may make no progress before it fails with TIMEOUT, in ms
 * @param connectTimeoutMillis how long a TCP connect may take, in ms
 * @param poolSize how many connections the pool holds at most
 * @param maxReplyBytes the largest bulk reply accepted, in bytes
 * @param maxElements the most members accepted in one aggregate reply
 * @param bufferBytes size of each connection's direct read buffer and command buffer, in bytes
 * @param tls the TLS context for {@code valkeys://}, or null for plain TCP
 * @param verifyHostname whether TLS checks that the server's certificate names the host it was reached by
 */
public record RespSettings(String user, String password, int database, int protocol, long timeoutMillis,
                           long connectTimeoutMillis, int poolSize, long maxReplyBytes, int maxElements,
                           int bufferBytes, SSLContext tls, boolean verifyHostname) {

    @Override
    public String toString() {
        return "RespSettings[user=" + user + ", password=" + (password == null ? "none" : "***") + ", database="
                + database + ", protocol=" + protocol + ", timeoutMillis=" + timeoutMillis
                + ", connectTimeoutMillis=" + connectTimeoutMillis + ", poolSize=" + poolSize + ", maxReplyBytes="
                + maxReplyBytes + ", maxElements=" + maxElements + ", bufferBytes=" + bufferBytes + ", tls=" + (tls != null) + ", verifyHostname=" + verifyHostname + "]";
    }
}
