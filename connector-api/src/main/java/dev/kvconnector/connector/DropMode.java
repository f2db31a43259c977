package dev.kvconnector.connector;

/** What a drop-select does with the entry after reading it. */
public enum DropMode {
    /** Remove every object of the request after a successful read: consumed exactly once (the XpYd default). */
    CONSUME,
    /** Leave the objects for prefix reuse by later requests; they expire with the connector's TTL. */
    RETAIN
}
