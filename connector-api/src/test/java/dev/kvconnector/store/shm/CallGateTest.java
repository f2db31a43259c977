package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class CallGateTest {

    @Test
    void theCloseWaitsForCallsInFlightAndLaterCallsAreClosedNamingTheFile() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB")) {
            CallGate gate = new CallGate(r.file, r.uri());
            assertEquals(r.lay.fileSize(), gate.enter("get", ShmRig.key("k")), "a call enters with the file's size");
            CompletableFuture<Boolean> closing = CompletableFuture.supplyAsync(gate::close);
            Thread.sleep(50);
            assertFalse(closing.isDone(), "a call is still in flight");
            assertEquals(CallGate.REFUSED, gate.tryEnter(), "no new call once the close began");
            gate.exit();
            assertTrue(closing.get(10, TimeUnit.SECONDS));
            assertFalse(gate.close(), "closed once");
            KVException e = assertThrows(KVException.class, () -> gate.enter("put", ShmRig.key("k")));
            assertEquals(ErrorCode.CLOSED, e.code());
            assertTrue(e.getMessage().contains(r.file.path().toString()) && e.getMessage().contains("put")
                    && e.getMessage().contains("(key k)"), e.getMessage());
            assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class,
                    () -> gate.requireCovers(0, "segment", ShmRig.key("k"))).code());
        }
    }

    @Test
    void aFileCutIntoTheTablesAdmitsNoCallAndACutPayloadAdmitsCallsWithTheSizeLeft() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB")) {
            CallGate gate = new CallGate(r.file, r.uri());
            long cut = r.lay.payloadOffset() + 4096;
            r.truncate(cut);
            assertEquals(cut, gate.enter("get", ShmRig.key("k")), "the payload is cut, the tables are whole");
            gate.exit();
            KVException covers = assertThrows(KVException.class,
                    () -> gate.requireCovers(cut + 1, "segment", ShmRig.key("k")));
            assertEquals(ErrorCode.CORRUPT_OBJECT, covers.code());
            gate.requireCovers(cut, "segment", ShmRig.key("k"));

            r.truncate(r.lay.payloadOffset() - 1);
            KVException e = assertThrows(KVException.class, () -> gate.enter("remove", ShmRig.key("k")));
            assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
            assertTrue(e.getMessage().contains(r.file.path() + " is " + (r.lay.payloadOffset() - 1) + " bytes, but "
                    + "this store mapped it at " + r.lay.fileSize() + " bytes") && e.getMessage().contains("remove")
                    && e.getMessage().contains("tables are lost"), e.getMessage());
            assertEquals(CallGate.REFUSED, gate.tryEnter());
            assertTrue(gate.close(), "and the refused calls were not counted in flight");
        }
    }
}
