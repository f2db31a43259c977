package dev.kvconnector.store;

/**
 * Receives a store's {@link StoreEvent}s ({@link KVStore#subscribe}). Called on the subscription's own thread, one
 * event at a time, in sequence order: keep it short and never block for long, since a slow listener makes a
 * subscription fall behind (an {@code shm:} ring then laps it, which shows as a gap). A listener that throws has
 * the failure sent to the subscription's error handler; the next event is delivered as usual.
 */
@FunctionalInterface
public interface StoreEventListener {
    /** One event. */
    void onEvent(StoreEvent event);
}
