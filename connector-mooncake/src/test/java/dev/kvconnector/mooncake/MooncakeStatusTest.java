package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.HashSet;
import java.util.Set;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Every native code of the spec's table maps to a named error with a hint. */
class MooncakeStatusTest {

    /** The codes of shared/spec/mooncake-store.md's table that Mooncake names individually. */
    static LongStream specCodes() {
        return LongStream.of(-1, -10, -100, -101, -102, -103, -200, -300, -400, -500, -600, -601,
                        -700, -701, -702, -703, -704, -705, -706, -707, -708, -709, -710, -711, -712, -713, -714,
                        -800, -801, -900, -901,
                        -1000, -1001, -1002, -1003, -1004, -1005, -1006, -1007, -1010, -1011, -1012,
                        -1100, -1101, -1102, -1103, -1104, -1105, -1106, -1200, -1201, -1202, -1203, -1300, -1301,
                        -1400, -1401, -1402, -1500, -1501, -1502, -1503,
                        -1600, -1601, -1602, -1603, -1604, -1605, -1700, -1701, -1702);
    }

    @ParameterizedTest
    @MethodSource("specCodes")
    void everySpecCodeHasANameAnErrorCodeAndAHint(long code) {
        MooncakeStatus s = MooncakeStatus.of(code);
        assertNotNull(s, "no name for " + code);
        assertEquals(code, s.nativeCode());
        assertNotNull(s.errorCode());
        assertTrue(s.hint().length() > 20, s.hint());
        KVException e = MooncakeStatus.toException(code, "mooncake://m:50051", "put", "key-1", null);
        assertEquals(s.errorCode(), e.code());
        assertEquals(code, e.nativeCode());
        assertEquals("put", e.operation());
        assertEquals("key-1", e.key());
        assertEquals("mooncake://m:50051", e.storeUri());
        assertTrue(e.getMessage().contains(s.name() + "(" + code + ")"), e.getMessage());
        assertTrue(e.getMessage().contains("Hint: " + s.hint()), e.getMessage());
    }

    @Test
    void codesAreUniqueAndAllNegative() {
        Set<Long> seen = new HashSet<>();
        for (MooncakeStatus s : MooncakeStatus.values()) {
            assertTrue(s.nativeCode() < 0, s.name());
            assertTrue(seen.add(s.nativeCode()), "duplicate " + s.nativeCode());
        }
    }

    @Test
    void rpcFailuresAskWhetherTheNamedMasterIsReachable() {
        KVException e = MooncakeStatus.toException(-900, "mooncake://10.0.0.5:50051", "get", "k", "master 10.0.0.5:50051");
        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
        assertTrue(e.hint().contains("master") && e.hint().contains("reachable"), e.hint());
        assertTrue(e.hint().contains("10.0.0.5:50051"), e.hint());
        assertEquals(ErrorCode.TIMEOUT, MooncakeStatus.toException(-901, "u", "get", "k", null).code());
        assertTrue(MooncakeStatus.of(-901).hint().contains("reachable"));
    }

    @Test
    void segmentNotFoundAsksWhetherTheSegmentIsStillMounted() {
        assertTrue(MooncakeStatus.of(-101).hint().contains("still mounted"));
        assertEquals(ErrorCode.STORE_UNREACHABLE, MooncakeStatus.of(-101).errorCode());
    }

    @Test
    void noAvailableHandleIsStoreFullAndAsksWhetherThePoolIsFull() {
        assertEquals(ErrorCode.STORE_FULL, MooncakeStatus.of(-200).errorCode());
        assertTrue(MooncakeStatus.of(-200).hint().contains("pool full"));
    }

    @Test
    void leasesAndUnfinishedPutsAreBusySoARetryCanHelp() {
        assertEquals(ErrorCode.BUSY, MooncakeStatus.of(-706).errorCode());
        assertEquals(ErrorCode.BUSY, MooncakeStatus.of(-703).errorCode());
        assertEquals(ErrorCode.Category.TRANSIENT, MooncakeStatus.of(-706).errorCode().category());
    }

    @Test
    void unnamedCodesFallBackToTheirGroup() {
        assertNull(MooncakeStatus.of(-1008));
        assertEquals("HA/etcd/mode error(-1008)", MooncakeStatus.describe(-1008));
        assertEquals("file error(-1199)", MooncakeStatus.describe(-1199));
        assertEquals("tenant error(-1750)", MooncakeStatus.describe(-1750));
        KVException e = MooncakeStatus.toException(-4242, "u", "get", null, null);
        assertEquals(ErrorCode.STORE_ERROR, e.code());
        assertEquals(-4242, e.nativeCode());
        assertTrue(e.hint().contains("does not know"), e.hint());
    }
}
