package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** What {@code claim-view=true} adds beyond the shared contract: claims and views are staging slots, lent out. */
class MooncakeClaimViewTest {
    private static final int SLOTS = 4;
    private static final long SLOT_BYTES = 1 << 20;

    private MooncakeStore store;
    private Arena arena;
    private String prefix;

    @BeforeEach
    void setUp() {
        store = MooncakeTestTarget.require().open("&staging=" + SLOTS * SLOT_BYTES + "&staging-slots=" + SLOTS
                + "&claim-view=true");
        arena = Arena.ofConfined();
        prefix = MooncakeTestTarget.uniquePrefix();
    }

    @AfterEach
    void tearDown() {
        try {
            assertEquals(SLOTS, store.freeStagingSlots(), "a claim or view kept its staging slot");
            store.removeMatching("^" + prefix);
        } finally {
            store.close();
            arena.close();
        }
    }

    @Test
    void declaresClaimAndViewOnlyWhenAskedTo() {
        assertTrue(store.capabilities().containsAll(List.of(StoreCapability.CLAIM, StoreCapability.VIEW)));
        try (MooncakeStore plain = MooncakeTestTarget.require().open("")) {
            assertFalse(plain.capabilities().contains(StoreCapability.CLAIM));
            assertFalse(plain.capabilities().contains(StoreCapability.VIEW));
            assertEquals(ErrorCode.UNSUPPORTED, assertThrows(KVException.class, plain::newView).code());
        }
    }

    @Test
    void aClaimHoldsOneStagingSlotUntilItsCommitOrAbort() {
        StoreClaim a = store.newClaim();
        StoreClaim b = store.newClaim();
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(prefix + "a", 1000, PutOptions.DEFAULT, a));
        assertEquals(SLOTS - 1, store.freeStagingSlots());
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(prefix + "b", 1000, PutOptions.DEFAULT, b));
        assertEquals(SLOTS - 2, store.freeStagingSlots());
        a.segment().fill((byte) 5);
        assertTrue(a.commit());
        b.abort();
        assertEquals(SLOTS, store.freeStagingSlots());
        MemorySegment dst = arena.allocate(1000);
        assertEquals(1000, store.getInto(prefix + "a", dst));
        assertEquals(5, dst.get(ValueLayout.JAVA_BYTE, 999));
        assertTrue(GetResult.isMiss(store.size(prefix + "b")));
    }

    @Test
    void aClaimFindsFullWhenEverySlotIsLentAndClaimsAgainOnceOneReturns() {
        List<StoreClaim> held = new ArrayList<>();
        for (int i = 0; i < SLOTS; i++) {
            StoreClaim c = store.newClaim();
            assertEquals(ClaimResult.CLAIMED, store.tryClaim(prefix + "h" + i, 64, PutOptions.DEFAULT, c));
            held.add(c);
        }
        StoreClaim late = store.newClaim();
        assertEquals(ClaimResult.FULL, store.tryClaim(prefix + "late", 64, PutOptions.DEFAULT, late));
        assertFalse(late.isClaimed());
        held.getFirst().abort();
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(prefix + "late", 64, PutOptions.DEFAULT, late));
        late.abort();
        held.forEach(StoreClaim::abort);
    }

    @Test
    @Timeout(30) // a commit that waited for a second slot would wait forever here
    void emptyAndOneByteClaimsCommitThroughTheirOwnSlotWhenNoOtherIsFree() {
        List<StoreClaim> others = new ArrayList<>();
        for (int i = 0; i < SLOTS - 2; i++) {
            StoreClaim c = store.newClaim();
            assertEquals(ClaimResult.CLAIMED, store.tryClaim(prefix + "o" + i, 64, PutOptions.DEFAULT, c));
            others.add(c);
        }
        StoreClaim empty = store.newClaim();
        StoreClaim one = store.newClaim();
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(prefix + "empty", 0, PutOptions.DEFAULT, empty));
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(prefix + "one", 1, PutOptions.DEFAULT, one));
        assertEquals(0, store.freeStagingSlots());
        one.segment().set(ValueLayout.JAVA_BYTE, 0, (byte) 42);
        assertTrue(empty.commit(), "an empty claim's commit must not wait for a slot of its own");
        assertTrue(one.commit());
        others.forEach(StoreClaim::abort);
        assertEquals(0, store.size(prefix + "empty"));
        MemorySegment dst = arena.allocate(1);
        assertEquals(1, store.getInto(prefix + "one", dst));
        assertEquals(42, dst.get(ValueLayout.JAVA_BYTE, 0));
    }

    @Test
    void claimsAndViewsBeyondAStagingSlotAreValueTooLargeAndNameTheSlot() {
        StoreClaim claim = store.newClaim();
        KVException e = assertThrows(KVException.class,
                () -> store.tryClaim(prefix + "big", SLOT_BYTES + 1, PutOptions.DEFAULT, claim));
        assertEquals(ErrorCode.VALUE_TOO_LARGE, e.code());
        assertTrue(e.getMessage().contains(SLOT_BYTES + " bytes"), e.getMessage());
        assertFalse(claim.isClaimed());

        MemorySegment big = arena.allocate(SLOT_BYTES + 1);
        store.register(big);
        try {
            big.fill((byte) 3);
            assertTrue(store.put(prefix + "big", big, PutOptions.DEFAULT));
        } finally {
            store.unregister(big);
        }
        StoreView view = store.newView();
        KVException v = assertThrows(KVException.class, () -> store.tryView(prefix + "big", view));
        assertEquals(ErrorCode.VALUE_TOO_LARGE, v.code());
        assertTrue(v.getMessage().contains((SLOT_BYTES + 1) + " bytes"), v.getMessage());
        assertFalse(view.isHeld());
    }

    @Test
    void aViewHoldsOneSlotUntilReleasedAndReadsTheStoredBytes() {
        MemorySegment v = arena.allocate(5000);
        for (int i = 0; i < 5000; i++) {
            v.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31));
        }
        assertTrue(store.put(prefix + "v", v, PutOptions.DEFAULT));
        StoreView view = store.newView();
        assertEquals(5000, store.tryView(prefix + "v", view));
        assertEquals(SLOTS - 1, store.freeStagingSlots());
        assertEquals(-1, view.segment().mismatch(v));
        view.release();
        assertEquals(SLOTS, store.freeStagingSlots());
        assertTrue(GetResult.isMiss(store.tryView(prefix + "absent", view)));
        assertEquals(SLOTS, store.freeStagingSlots(), "a miss kept its slot");
    }
}
