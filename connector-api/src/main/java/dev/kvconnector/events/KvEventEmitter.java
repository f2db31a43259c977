package dev.kvconnector.events;

import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.key.ChunkKeys;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A connector's side of its events: numbers them (one epoch per emitter, a sequence per event) and hands them to
 * the listener on the caller's thread. A connector built without a listener has no emitter, so its paths allocate
 * nothing for events; with one, an event is one small record. Thread-safe: numbering and delivery happen under one
 * lock, so a listener sees the sequence in order.
 */
public final class KvEventEmitter {
    private final KvEventListener listener;
    private final KvEventSource source;
    private final ErrorHandler errors;
    private long next;

    /**
     * An emitter for {@code listener}, attached at once ({@link KvEventListener#onAttach}).
     *
     * @param storeUri the connector's store
     * @param keyScheme its key scheme's name
     * @param chunkTokens tokens per chunk
     * @param rootHash the hex seed of the scheme's hash chains, or null
     */
    public KvEventEmitter(KvEventListener listener, String instance, String storeUri, String keyScheme,
                          int chunkTokens, String rootHash, ErrorHandler errors) {
        this.listener = listener;
        this.errors = errors;
        // Wall-clock milliseconds, salted: a restart gets a larger epoch, two processes started in one ms differ.
        long epoch = (System.currentTimeMillis() << 12) | ThreadLocalRandom.current().nextInt(1 << 12);
        this.source = new KvEventSource(instance, epoch, storeUri, keyScheme, chunkTokens, rootHash);
        listener.onAttach(source);
    }

    /** Who publishes, and how its chunks hash. */
    public KvEventSource source() {
        return source;
    }

    /** The first {@code count} chunks of a request were committed with {@code layers} layers. */
    public synchronized void stored(ChunkKeys[] chunks, int count, int layers) {
        for (int c = 0; c < count; c++) {
            String parent = c == 0 ? source.rootHash() : chunks[c - 1].hashHex();
            deliver(new KvEvent.Stored(source.epoch(), next++, source.instance(), source.storeUri(),
                    source.keyScheme(), chunks[c].hashHex(), parent, chunks[c].tokens(), layers));
        }
    }

    /** The first {@code count} chunks of a request left the store for {@code reason}. */
    public synchronized void removed(ChunkKeys[] chunks, int count, RemovalReason reason) {
        for (int c = 0; c < count; c++) {
            deliver(new KvEvent.Removed(source.epoch(), next++, source.instance(), source.storeUri(),
                    chunks[c].hashHex(), reason));
        }
    }

    /** The chunk {@code chunkHash} left the store for {@code reason}, as the store told it. */
    public synchronized void removed(String chunkHash, RemovalReason reason) {
        deliver(new KvEvent.Removed(source.epoch(), next++, source.instance(), source.storeUri(), chunkHash, reason));
    }

    /**
     * Skips a sequence number: events about the store were lost before they reached this emitter (the store's own
     * subscription had a gap), so the listener sees a gap and resynchronises.
     */
    public synchronized void gap() {
        next++;
    }

    /** A drop-select of a request starting with {@code firstChunk} (null for none) missed for {@code reason}. */
    public synchronized void loadFailed(ChunkKeys firstChunk, MissReason reason, int requestedTokens) {
        deliver(new KvEvent.LoadFailed(source.epoch(), next++, source.instance(), source.storeUri(),
                firstChunk == null ? null : firstChunk.hashHex(), reason, requestedTokens));
    }

    private void deliver(KvEvent event) {
        try {
            listener.onEvent(event);
        } catch (RuntimeException e) {
            errors.onError("KV event listener of " + source.instance() + " on " + source.storeUri(), e);
        }
    }
}
