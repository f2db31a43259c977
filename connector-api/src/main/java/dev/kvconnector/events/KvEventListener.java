package dev.kvconnector.events;

/**
 * Receives a connector's {@link KvEvent}s in process ({@code StoreConnector.Builder.events(listener)}).
 *
 * <p>Called on the thread that made the change (the engine's thread committing an insert or running a
 * drop-select, a connector I/O thread for a layer-wise drop-select, or the store's event thread for a removal the
 * store told), in sequence order per connector: keep it short and never block (hand the event to a queue, as
 * {@link ZmqKvEventPublisher} does). A skipped sequence number means events were lost on the way (the store's
 * events had a gap): resynchronise. A listener that throws has the failure sent to the connector's error handler;
 * the insert or drop-select is not affected.
 */
@FunctionalInterface
public interface KvEventListener {
    /** One event. */
    void onEvent(KvEvent event);

    /** Called once, when the connector is built, before any event: who publishes and how its chunks hash. */
    default void onAttach(KvEventSource source) {
    }
}
