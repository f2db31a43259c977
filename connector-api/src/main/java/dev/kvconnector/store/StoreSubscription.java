package dev.kvconnector.store;

/**
 * A listener's subscription to a store's events ({@link KVStore#subscribe}). Closing it stops the deliveries and
 * the thread that makes them; once {@link #close()} returns the listener is called no more. Closing the store
 * closes its subscriptions.
 */
public interface StoreSubscription extends AutoCloseable {
    /** Stops the deliveries; idempotent. */
    @Override
    void close();
}
