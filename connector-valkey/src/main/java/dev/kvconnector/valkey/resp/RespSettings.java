package dev.kvconnector.valkey.resp;

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
 */
public record RespSettings(String user, String password, int database, int protocol, long timeoutMillis,
                           long connectTimeoutMillis, int poolSize, long maxReplyBytes, int maxElements,
                           int bufferBytes) {

    @Override
    public String toString() {
        return "RespSettings[user=" + user + ", password=" + (password == null ? "none" : "***") + ", database="
                + database + ", protocol=" + protocol + ", timeoutMillis=" + timeoutMillis
                + ", connectTimeoutMillis=" + connectTimeoutMillis + ", poolSize=" + poolSize + ", maxReplyBytes="
                + maxReplyBytes + ", maxElements=" + maxElements + ", bufferBytes=" + bufferBytes + "]";
    }
}
