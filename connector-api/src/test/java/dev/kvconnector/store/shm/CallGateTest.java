package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class CallGateTest {
    private final CallGate gate = new CallGate(Path.of("/dev/shm/g"), "shm:/g");

    @Test
    void theCloseWaitsForCallsInFlightAndLaterCallsAreClosedNamingTheFile() throws Exception {
        gate.enter("get");
        CompletableFuture<Boolean> closing = CompletableFuture.supplyAsync(gate::close);
        Thread.sleep(50);
        assertFalse(closing.isDone(), "a call is still in flight");
        assertFalse(gate.enterIfOpen(), "no new call once the close began");
        gate.exit();
        assertTrue(closing.get(10, TimeUnit.SECONDS));
        assertFalse(gate.close(), "closed once");
        KVException e = assertThrows(KVException.class, () -> gate.enter("put"));
        assertEquals(ErrorCode.CLOSED, e.code());
        assertTrue(e.getMessage().contains("/dev/shm/g") && e.getMessage().contains("put"), e.getMessage());
    }
}
