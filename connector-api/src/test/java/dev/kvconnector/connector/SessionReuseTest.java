package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * An insert begun in an ended session ({@link KVStoreConnector#beginInsert(RequestTokens, InsertSession)}) and the
 * connector's reuse of whole-request drop-select sessions: every request lands under its own keys, whatever the
 * session moved before, and misuse is refused by name.
 */
class SessionReuseTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");

    private Arena arena;
    private KVStore store;
    private KVStoreConnector kv;

    @BeforeEach
    void open() {
        arena = Arena.ofShared();
        store = KVStores.open("memory:?capacity=256MiB");
        kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(16).build();
    }

    @AfterEach
    void close() {
        kv.close();
        store.close();
        arena.close();
    }

    /** Layer tensors of {@code tokens} tokens, filled from {@code seed}. */
    private Tensor[][] tensors(int tokens, long seed) {
        TensorSpec spec = TensorSpec.of(LAYOUT.dtype(), tokens, LAYOUT.kvHeads(), LAYOUT.headSize());
        Tensor[][] t = new Tensor[LAYOUT.numLayers()][2];
        for (int l = 0; l < t.length; l++) {
            for (int i = 0; i < 2; i++) {
                t[l][i] = Tensor.host(spec, Segments.random(arena, spec.byteSize(), seed * 1000 + l * 2 + i));
            }
        }
        return t;
    }

    private static void putAll(InsertSession s, Tensor[][] from) {
        for (int l = 0; l < from.length; l++) {
            s.putLayer(l, LayerSource.contiguous(l, from[l]));
        }
    }

    /** Drop-selects {@code request} into new tensors and checks they hold {@code from}'s bytes. */
    private void requireHolds(RequestTokens request, Tensor[][] from) {
        Tensor[][] into = tensors(request.totalTokens(), 0);
        DropResult r = kv.dropSelect(request, DropTarget.contiguous(into), DropMode.RETAIN);
        assertTrue(r.isComplete(), r.toString());
        for (int l = 0; l < from.length; l++) {
            for (int i = 0; i < 2; i++) {
                assertTrue(Segments.equal(from[l][i].segment(), into[l][i].segment(), from[l][i].spec().byteSize()),
                        "layer " + l + " tensor " + i);
            }
        }
    }

    private static RequestTokens request(int tokens, int seed) {
        int[] ids = new int[tokens];
        for (int i = 0; i < tokens; i++) {
            ids[i] = seed * 7919 + i;
        }
        return RequestTokens.of(ids);
    }

    @Test
    void anInsertInAnEndedSessionStoresTheNewRequestAndLeavesTheOldOneWhole() {
        RequestTokens first = request(40, 1);
        RequestTokens second = request(40, 2);
        Tensor[][] a = tensors(40, 1);
        Tensor[][] b = tensors(40, 2);
        InsertSession s = kv.beginInsert(first, null);
        putAll(s, a);
        s.commit();
        InsertSession again = kv.beginInsert(second, s);
        assertSame(s, again, "the ended session is reused");
        assertEquals(40, again.tokens());
        putAll(again, b);
        again.commit();
        requireHolds(first, a);
        requireHolds(second, b);
        assertEquals(40, kv.lookup(first));
        assertEquals(40, kv.lookup(second));
    }

    @Test
    void aReusedSessionTakesARequestOfAnotherShape() {
        Tensor[][] a = tensors(40, 3);
        Tensor[][] b = tensors(70, 4);
        Tensor[][] c = tensors(9, 5);
        InsertSession s = kv.beginInsert(request(40, 3));
        putAll(s, a);
        s.commit();
        s = kv.beginInsert(request(70, 4), s);
        assertEquals(70, s.tokens());
        putAll(s, b);
        s.commit();
        s = kv.beginInsert(request(9, 5), s);
        putAll(s, c);
        s.commit();
        requireHolds(request(40, 3), a);
        requireHolds(request(70, 4), b);
        requireHolds(request(9, 5), c);
    }

    @Test
    void aSessionReusedAfterAnAbortStartsWithNothingPutAndTheAbortedRequestStaysAbsent() {
        InsertSession s = kv.beginInsert(request(40, 6));
        s.putLayer(0, LayerSource.contiguous(0, tensors(40, 6)[0]));
        s.abort();
        Tensor[][] b = tensors(40, 7);
        s = kv.beginInsert(request(40, 7), s);
        putAll(s, b);
        s.commit();
        requireHolds(request(40, 7), b);
        assertEquals(0, kv.lookup(request(40, 6)));
        String abortedLayer = new KvcV1KeyScheme().plan(kv.keyContext(), request(40, 6)).chunks().get(0).layerKey(0);
        assertFalse(store.exists(abortedLayer), "the aborted layer was removed");
    }

    @Test
    void anOpenSessionOrAnotherConnectorsIsRefusedByName() {
        InsertSession open = kv.beginInsert(request(20, 8));
        KVException e = assertThrows(KVException.class, () -> kv.beginInsert(request(20, 9), open));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("still open"), e.getMessage());
        open.close();
        try (KVStoreConnector other = KVStoreConnector.builder(store, LAYOUT).build()) {
            InsertSession theirs = other.beginInsert(request(20, 10));
            theirs.close();
            e = assertThrows(KVException.class, () -> kv.beginInsert(request(20, 11), theirs));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("not begun by this connector"), e.getMessage());
        }
        InsertSession fresh = kv.beginInsert(request(20, 12), null);
        assertNotSame(open, fresh);
        fresh.close();
    }

    @Test
    void aClosedSessionIsStillEndedWhenCloseFollowsCommitAndCannotBeCommittedAgain() {
        InsertSession s = kv.beginInsert(request(20, 13));
        putAll(s, tensors(20, 13));
        s.commit();
        s.close();
        KVException e = assertThrows(KVException.class, s::commit);
        assertEquals(ErrorCode.CLOSED, e.code());
        InsertSession again = kv.beginInsert(request(20, 14), s);
        putAll(again, tensors(20, 14));
        again.commit();
        assertEquals(20, kv.lookup(request(20, 14)));
    }

    @Test
    void aLayerWiseDropSelectInAnEndedSessionLoadsTheNewRequest() {
        DropSession last = null;
        int[] sizes = {40, 40, 70};
        for (int i = 0; i < sizes.length; i++) {
            RequestTokens r = request(sizes[i], 20 + i);
            Tensor[][] from = tensors(sizes[i], 20 + i);
            Tensor[][] into = tensors(sizes[i], 0);
            DropSession drop = kv.beginDropSelect(r, DropTarget.contiguous(into), last);
            if (last != null && i < 2) {
                assertSame(last, drop, "the ended session is reused");
            }
            try (InsertSession s = kv.beginInsert(r)) {
                putAll(s, from);
                s.commit();
            }
            assertTrue(drop.result().isComplete(), drop.result().toString());
            for (int l = 0; l < from.length; l++) {
                assertTrue(Segments.equal(from[l][0].segment(), into[l][0].segment(), from[l][0].spec().byteSize()),
                        "request " + i + " layer " + l);
            }
            last = drop;
        }
    }

    @Test
    void aLayerWiseDropSelectStillLoadingIsRefusedAsTheSessionOfTheNext() {
        DropSession loading = kv.beginDropSelect(request(20, 30), DropTarget.contiguous(tensors(20, 0)));
        KVException e = assertThrows(KVException.class,
                () -> kv.beginDropSelect(request(20, 31), DropTarget.contiguous(tensors(20, 0)), loading));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("still loading"), e.getMessage());
        assertTrue(loading.abandon("the test is over"));
        loading.close();
    }

    @Test
    void concurrentWholeRequestDropSelectsEachGetTheirOwnRequest() throws Exception {
        int requests = 24;
        List<Tensor[][]> sources = new ArrayList<>();
        for (int i = 0; i < requests; i++) {
            Tensor[][] t = tensors(16 + i, 100 + i);
            sources.add(t);
            try (InsertSession s = kv.beginInsert(request(16 + i, 100 + i))) {
                putAll(s, t);
                s.commit();
            }
        }
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int round = 0; round < 3; round++) {
                for (int i = 0; i < requests; i++) {
                    int n = i;
                    done.add(pool.submit(() -> requireHolds(request(16 + n, 100 + n), sources.get(n))));
                }
            }
            for (Future<?> f : done) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aDropSelectThatFailsLeavesTheNextOneWhole() {
        Tensor[][] a = tensors(32, 15);
        try (InsertSession s = kv.beginInsert(request(32, 15))) {
            putAll(s, a);
            s.commit();
        }
        Tensor[][] tooShort = tensors(8, 0);
        assertThrows(KVException.class, () -> kv.dropSelect(request(32, 15), DropTarget.contiguous(tooShort)));
        requireHolds(request(32, 15), a);
        assertEquals(0, kv.dropSelect(request(32, 16), DropTarget.contiguous(tensors(32, 0))).matchedTokens());
        requireHolds(request(32, 15), a);
    }
}
