package dev.kvconnector.store.tiered;

import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.StoreSubscription;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Consumer;

/**
 * A subscription to a {@link TieredStore}'s events: a subscription to each tier that declares
 * {@link StoreCapability#EVENTS}, merged into one stream with numbers of its own.
 *
 * <ul>
 *   <li>What is stored and removed through the tiered store ({@link #tell}), naming it: a removal of a batch is told
 *       for every key of the batch once it removed any.</li>
 *   <li>Each tier's event is passed on as it is, naming the tier ({@link StoreEvent#storeUri()} is the tier's URI):
 *       a store, removal, eviction or expiry in that tier alone.</li>
 *   <li>When an object leaves a tier and no other tier holds it (asked with {@code exists} on each, from the tier's
 *       event thread), one more event tells it left the tiered store as a whole: the same type and key, naming the
 *       tiered store. That is how evictions, expiries and other clients' removals in a tier reach it. A tier that
 *       cannot answer counts as holding it, so that nothing is told gone that may not be; an object that leaves
 *       several tiers at once, or through the tiered store, may be told gone more than once.</li>
 *   <li>A gap in a tier's events (or a new epoch) is a gap in these numbers.</li>
 * </ul>
 * Events are delivered one at a time, in order of arrival across the tiers, on the tiers' event threads (and on the
 * caller's thread for what is told through the store).
 */
final class TieredEvents implements StoreSubscription {
    private final String uri;
    private final KVStore[] tiers;
    private final StoreEventListener listener;
    private final ErrorHandler errors;
    private final long epoch = (System.currentTimeMillis() << 12) | ThreadLocalRandom.current().nextInt(1 << 12);
    private final List<StoreSubscription> subscriptions = new ArrayList<>();
    private final StoreEvent[] last;
    private final Consumer<StoreSubscription> onClose;
    private long next;
    private boolean skip;

    private TieredEvents(String uri, KVStore[] tiers, StoreEventListener listener, ErrorHandler errors,
                         Consumer<StoreSubscription> onClose) {
        this.onClose = onClose;
        this.uri = uri;
        this.tiers = tiers;
        this.listener = listener;
        this.errors = errors;
        this.last = new StoreEvent[tiers.length];
    }

    /**
     * Subscribes to every tier that tells its events; on a failure closes those already subscribed.
     *
     * @param onClose called when the subscription closes, so the store forgets it
     */
    static TieredEvents subscribe(String uri, KVStore[] tiers, StoreEventListener listener, ErrorHandler errors,
                                  Consumer<StoreSubscription> onClose) {
        TieredEvents merged = new TieredEvents(uri, tiers, listener, errors, onClose);
        try {
            for (int i = 0; i < tiers.length; i++) {
                if (tiers[i].capabilities().contains(StoreCapability.EVENTS)) {
                    int tier = i;
                    StoreSubscription s = tiers[i].subscribe(e -> merged.onTierEvent(tier, e), errors);
                    synchronized (merged.subscriptions) {
                        merged.subscriptions.add(s);
                    }
                }
            }
            return merged;
        } catch (RuntimeException e) {
            merged.close();
            throw e;
        }
    }

    private void onTierEvent(int tier, StoreEvent e) {
        synchronized (this) {
            StoreEvent before = last[tier];
            skip |= before != null && !before.isFollowedBy(e);
            last[tier] = e;
            deliver(e.type(), tiers[tier].uri(), e.key(), e.bytes());
        }
        if (e.type() != StoreEvent.Type.STORED && inNoOtherTier(tier, e.key())) {
            synchronized (this) {
                deliver(e.type(), uri, e.key(), e.bytes());
            }
        }
    }

    private boolean inNoOtherTier(int tier, String key) {
        for (int j = 0; j < tiers.length; j++) {
            try {
                if (j != tier && tiers[j].exists(key)) {
                    return false;
                }
            } catch (RuntimeException ex) {
                return false;
            }
        }
        return true;
    }

    /** Tells that {@code key} was stored in or removed from the tiered store through a call to it. */
    synchronized void tell(StoreEvent.Type type, String key, long bytes) {
        deliver(type, uri, key, bytes);
    }

    /** Numbers and hands on one event; called holding this object's lock. */
    private void deliver(StoreEvent.Type type, String storeUri, String key, long bytes) {
        if (skip) {
            next++;
            skip = false;
        }
        try {
            listener.onEvent(new StoreEvent(epoch, next++, type, storeUri, key, bytes));
        } catch (RuntimeException ex) {
            try {
                errors.onError("event listener of " + uri, ex);
            } catch (RuntimeException ignored) {
                // The handler failing too must not stop the tier's subscription.
            }
        }
    }

    @Override
    public void close() {
        List<StoreSubscription> open;
        synchronized (subscriptions) {
            open = List.copyOf(subscriptions);
            subscriptions.clear();
        }
        for (StoreSubscription s : open) {
            s.close();
        }
        onClose.accept(this);
    }
}
