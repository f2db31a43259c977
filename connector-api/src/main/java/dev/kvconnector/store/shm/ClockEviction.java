package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.H_CLOCK_HAND;

import java.lang.foreign.MemorySegment;

/**
 * CLOCK eviction, the store's approximation of LRU: a hand in the header sweeps the entry table; a committed entry
 * read since the hand last passed (its referenced mark set) gets a second chance, an expired one does not, and a
 * leased one is never taken. On the way the hand frees what no one can read any more: retired entries no lease
 * names, and unfinished puts of dead processes. An entry it takes is told to the event ring as evicted, or expired
 * when its time was up. Runs under the store lock.
 */
final class ClockEviction {
    private final EntryTable entries;
    private final LeaseTable leases;
    private final ShmIndex index;
    private final EventRing events;
    private final ShmSpace space;
    private final MemorySegment map;
    private final boolean evictLive;

    /** @param evictLive false for {@code eviction=refuse}: only dead, expired and removed entries are freed */
    ClockEviction(MemorySegment map, EntryTable entries, LeaseTable leases, ShmIndex index, EventRing events,
                  ShmSpace space, boolean evictLive) {
        this.map = map;
        this.entries = entries;
        this.leases = leases;
        this.index = index;
        this.events = events;
        this.space = space;
        this.evictLive = evictLive;
    }

    /** Advances the hand until one entry's space is freed; false when a full double sweep frees nothing. */
    boolean evictOne(long now) {
        int mark = entries.watermark();
        if (mark == 0) {
            return false;
        }
        for (long step = 0; step < 2 * mark; step++) {
            long hand = ShmLayout.word(map, H_CLOCK_HAND);
            int e = (int) (hand >= 0 && hand < mark ? hand : 0);
            ShmLayout.setWord(map, H_CLOCK_HAND, (e + 1L) % mark);
            if (tryEvict(e, now)) {
                return true;
            }
        }
        return false;
    }

    private boolean tryEvict(int e, long now) {
        switch (entries.state(e)) {
            case ShmLayout.WRITING -> {
                if (!ProcessIdentity.isAlive(entries.owner(e))) {
                    space.free(e);
                    return true;
                }
                return false;
            }
            case ShmLayout.RETIRED -> {
                if (!leases.leased(e)) {
                    space.free(e);
                    return true;
                }
                return false;
            }
            case ShmLayout.COMMITTED -> {
                boolean expired = entries.expired(e, now);
                if (!expired && (!evictLive || entries.clearReferenced(e))) {
                    return false; // kept: eviction=refuse, or its second chance
                }
                if (leases.leased(e)) {
                    return false;
                }
                index.remove(e);
                events.transmit(expired ? ShmLayout.EVENT_EXPIRED : ShmLayout.EVENT_EVICTED, e);
                return space.retire(e);
            }
            default -> {
                return false;
            }
        }
    }
}
