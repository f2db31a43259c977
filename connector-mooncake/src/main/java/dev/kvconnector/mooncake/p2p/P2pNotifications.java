package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.mooncake.te.Notification;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

/**
 * The connector's notification thread: polls the engine's notifications and hands each {@link P2pMessage} to the
 * drop-select or insert of its transfer id. Between empty polls it backs off from 10 us to
 * {@link #ACTIVE_PARK_MAX_NS} while a drop-select waits, and to {@link #IDLE_PARK_MAX_NS} when none does. A message
 * for a transfer that ended, from a peer that is not the transfer's producer (one the prefill moved away from), for
 * one never known, or that is not of the protocol goes to the error handler and is counted; it never reaches a cache.
 */
final class P2pNotifications implements AutoCloseable {
    /** Transfers that ended, remembered to tell a late peer's messages from unknown ones. */
    static final int ENDED_REMEMBERED = 4096;
    /**
     * The longest park between empty polls while a drop-select of this connector waits, in ns: a layer's message is
     * seen at most about this late. Shorter costs the poller more wake-ups (about 19 us of CPU each on this
     * project's 2-vCPU VM under load, 5 December 2026), longer delays the last layer and the commit of each request.
     */
    static final long ACTIVE_PARK_MAX_NS = 200_000;
    /** The longest park between empty polls while none waits, in ns. */
    static final long IDLE_PARK_MAX_NS = 1_000_000;
    private static final AtomicInteger THREADS = new AtomicInteger();

    private final TransferEngineConnector c;
    private final Map<String, String> ended = Collections.synchronizedMap(new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
            return size() > ENDED_REMEMBERED;
        }
    });
    private final LongAdder stale = new LongAdder();
    private final LongAdder unknown = new LongAdder();
    private final Thread thread;
    private volatile boolean running = true;

    P2pNotifications(TransferEngineConnector c) {
        this.c = c;
        this.thread = Thread.ofPlatform().daemon().name("kvconnector-io-p2p-" + THREADS.incrementAndGet())
                .start(this::run);
    }

    /** Remembers that D's transfer {@code transferId} ended, and why, for its producer's late messages. */
    void ended(String transferId, String why) {
        ended.put(transferId, why);
    }

    long stale() {
        return stale.sum();
    }

    long unknown() {
        return unknown.sum();
    }

    private void run() {
        long idle = 10_000;
        while (running) {
            List<Notification> batch;
            try {
                batch = c.engine.notifications();
            } catch (RuntimeException e) {
                if (running) {
                    c.errors.onError("p2p notifications on " + c.endpoint, e);
                    LockSupport.parkNanos(1_000_000);
                }
                continue;
            }
            if (batch.isEmpty()) {
                LockSupport.parkNanos(idle);
                idle = Math.min(idle * 2, c.inbound.isEmpty() ? IDLE_PARK_MAX_NS : ACTIVE_PARK_MAX_NS);
                continue;
            }
            idle = 10_000;
            for (Notification n : batch) {
                dispatch(n);
            }
        }
    }

    private void dispatch(Notification n) {
        P2pMessage m = P2pMessage.parse(n.message());
        if (m == null) {
            unknown.increment();
            report("notification '" + n.name() + "': '" + abbreviate(n.message()) + "' is not a kvc-p2p/1 message",
                    n.name());
            return;
        }
        if (m.kind() == P2pMessage.Kind.CANCEL) {
            P2pInsertSession s = c.outbound.get(n.name());
            if (s != null) {
                s.cancel(m.sender(), m.text());
            }
            return;
        }
        P2pDropSession s = c.inbound.get(n.name());
        P2pDropSession.Offer o = s == null ? P2pDropSession.Offer.ENDED : s.offer(m);
        if (o == P2pDropSession.Offer.ACCEPTED) {
            return;
        }
        if (o == P2pDropSession.Offer.NOT_PRODUCER || o == P2pDropSession.Offer.STOP_SENDER) {
            stale.increment();
            if (o == P2pDropSession.Offer.STOP_SENDER) {
                c.tell(m.sender(), n.name(), P2pMessage.cancel(c.engine.segmentName(), "not the producer of transfer "
                        + n.name() + " (generation " + m.generation() + "): the prefill moved to another P"));
            }
            report("peer " + m.sender() + " sent " + m.kind() + " of generation " + m.generation() + " for transfer "
                    + n.name() + ", whose producer it is not (the prefill moved away from it, or another P writes it);"
                    + " ignored, D's cache untouched" + (o == P2pDropSession.Offer.STOP_SENDER ? ", the peer told to stop"
                    : ""), n.name());
            return;
        }
        String why = ended.get(n.name());
        if (why != null) {
            stale.increment();
            report("producer " + m.sender() + " sent " + m.kind() + " for transfer " + n.name() + ", which this D "
                    + "no longer waits for (" + why + "); ignored, D's cache untouched", n.name());
        } else {
            unknown.increment();
            report("producer " + m.sender() + " sent " + m.kind() + " for unknown transfer " + n.name()
                    + ": no drop-select of this connector waits for it; ignored", n.name());
        }
    }

    private void report(String detail, String tid) {
        c.errors.onError("p2p notification on " + c.endpoint, KVException.of(ErrorCode.PROTOCOL_ERROR, detail)
                .store(c.endpoint).operation("notification").key(tid).build());
    }

    private static String abbreviate(String s) {
        return s == null ? "null" : s.length() <= 80 ? s : s.substring(0, 80) + "...";
    }

    /** Stops the thread and waits (up to 10 s) for it: the engine must not be closed under a poll. */
    @Override
    public void close() {
        running = false;
        thread.interrupt();
        try {
            thread.join(TimeUnit.SECONDS.toMillis(10));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
