package dev.kvconnector.testkit;

import dev.kvconnector.connector.ConnectorMetrics;
import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.PagedLayers;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.SlotMapping;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.Tensor;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A {@link KVStoreConnector} that breaks one promise of the interface, and otherwise passes every call to the
 * connector it wraps: what {@link KVStoreConnectorContractCatchesBreakageTest} runs {@link KVStoreConnectorContract}
 * against, to prove that each case fails when the behaviour it names breaks.
 */
final class BrokenConnector implements KVStoreConnector {
    /** The promise broken, and the contract's case that must then fail. */
    enum Breakage {
        /** Breaks nothing. */
        NONE(null),
        /** awaitLayer waits for the whole load, the commit included. */
        AWAIT_WAITS_FOR_THE_COMMIT("awaitLayerZeroReturnsBeforeTheProducersLastPutLayer"),
        /** The producer gathers each token's KV from the next token's slot. */
        TOKENS_SHIFTED("everyByteOfEveryLayerAndTheHiddenStatesLandInTheConsumersBlocks"),
        /** A layer of the wrong dtype or shape is ignored instead of refused. */
        SHAPES_UNCHECKED("aWrongDtypeOrShapeIsRefusedBeforeAnythingIsWrittenAndTheDestinationIsUntouched"),
        /** A miss comes 5 s after the layer-wise drop-select found it. */
        LATE_TIMEOUT("aProducerThatStopsIsATimedOutMissWithinTheLayerTimeoutNeverAHang"),
        /** A miss carries no detail. */
        MISS_WITHOUT_DETAIL("aProducerThatAbortsIsAMissWithItsReason"),
        /** A commit that fails is reported as done. */
        COMMIT_FAILURE_SWALLOWED("commitWithALayerNeverPutFailsNamingTheLayerAndTheConsumerMisses"),
        /** Every drop-select writes into the first target any drop-select was given. */
        ONE_TARGET_FOR_ALL("twoRequestsAtOnceIntoDifferentBlocksEachGetTheirOwnBytes"),
        /** Layer objects carry no checksum (a store connector built with {@code checksums(false)}). */
        NO_CHECKSUMS("aCorruptLayerIsNeverAccepted"),
        /** lookup answers every request's tokens, committed or not. */
        LOOKUP_BEFORE_COMMIT("lookupSeesNothingOfAnInsertBeforeItsCommit"),
        /** metrics() counts nothing. */
        METRICS_FROZEN("metricsCountLayersBytesCommitsHitsAndMissesUntilReset"),
        /** close() does nothing. */
        CLOSE_IGNORED("closeEndsTransfersInFlightAndRefusesNewOnes");

        /** The name of the contract's case that must fail. */
        final String caseThatCatchesIt;

        Breakage(String caseThatCatchesIt) {
            this.caseThatCatchesIt = caseThatCatchesIt;
        }
    }

    private static final long LATE_NANOS = TimeUnit.SECONDS.toNanos(5);
    private final KVStoreConnector c;
    private final Breakage breakage;
    private volatile DropTarget firstTarget;

    BrokenConnector(KVStoreConnector connector, Breakage breakage) {
        this.c = connector;
        this.breakage = breakage;
    }

    @Override
    public InsertSession beginInsert(RequestTokens request) {
        return new Insert(c.beginInsert(request));
    }

    @Override
    public int lookup(RequestTokens request) {
        return breakage == Breakage.LOOKUP_BEFORE_COMMIT ? request.totalTokens() : c.lookup(request);
    }

    @Override
    public DropResult dropSelect(RequestTokens request, DropTarget target) {
        return c.dropSelect(request, target);
    }

    @Override
    public DropResult dropSelect(RequestTokens request, DropTarget target, DropMode mode) {
        return c.dropSelect(request, target, mode);
    }

    @Override
    public DropSession beginDropSelect(RequestTokens request, DropTarget target) {
        if (firstTarget == null) {
            firstTarget = target;
        }
        return new Drop(c.beginDropSelect(request, breakage == Breakage.ONE_TARGET_FOR_ALL ? firstTarget : target));
    }

    @Override
    public KVLayout layout() {
        return c.layout();
    }

    @Override
    public KeyContext keyContext() {
        return c.keyContext();
    }

    @Override
    public boolean holdsHiddenStates() {
        return c.holdsHiddenStates();
    }

    @Override
    public boolean bindsNamespace() {
        return c.bindsNamespace();
    }

    @Override
    public String endpoint() {
        return c.endpoint();
    }

    @Override
    public ConnectorMetrics.Snapshot metrics() {
        if (breakage != Breakage.METRICS_FROZEN) {
            return c.metrics();
        }
        ConnectorMetrics.LatencySummary none = new ConnectorMetrics.LatencySummary(0, 0, 0, 0, 0);
        return new ConnectorMetrics.Snapshot(none, none, 0, 0, 0, 0, 0, 0, Map.of(), none);
    }

    @Override
    public void resetMetrics() {
        c.resetMetrics();
    }

    @Override
    public void close() {
        if (breakage != Breakage.CLOSE_IGNORED) {
            c.close();
        }
    }

    private final class Insert implements InsertSession {
        private final InsertSession s;

        Insert(InsertSession s) {
            this.s = s;
        }

        @Override
        public int tokens() {
            return s.tokens();
        }

        @Override
        public void putLayer(int layer, LayerSource source) {
            if (breakage == Breakage.TOKENS_SHIFTED && source instanceof PagedLayers paged) {
                s.putLayer(layer, LayerSource.paged(paged.cache(), shifted(paged.slots())));
                return;
            }
            try {
                s.putLayer(layer, source);
            } catch (KVException e) {
                if (breakage != Breakage.SHAPES_UNCHECKED) {
                    throw e;
                }
            }
        }

        /** Token i's slot is token i + 1's (the last token's is token 0's). */
        private TokenSlots shifted(TokenSlots slots) {
            long[] next = new long[slots.tokens()];
            for (int i = 0; i < next.length; i++) {
                next[i] = slots.slot((i + 1) % next.length);
            }
            return new SlotMapping(next);
        }

        @Override
        public void putLayers(LayerSource source) {
            s.putLayers(source);
        }

        @Override
        public void putHidden(Tensor hidden) {
            s.putHidden(hidden);
        }

        @Override
        public void commit() {
            try {
                s.commit();
            } catch (KVException e) {
                if (breakage != Breakage.COMMIT_FAILURE_SWALLOWED) {
                    throw e;
                }
            }
        }

        @Override
        public void abort() {
            s.abort();
        }

        @Override
        public void close() {
            s.close();
        }
    }

    private final class Drop implements DropSession {
        private final DropSession s;

        Drop(DropSession s) {
            this.s = s;
        }

        @Override
        public boolean awaitLayer(int layer) {
            if (breakage == Breakage.AWAIT_WAITS_FOR_THE_COMMIT) {
                s.result();
            }
            boolean loaded = s.awaitLayer(layer);
            if (!loaded && breakage == Breakage.LATE_TIMEOUT) {
                LockSupport.parkNanos(LATE_NANOS);
            }
            return loaded;
        }

        @Override
        public DropResult result() {
            DropResult r = s.result();
            return breakage == Breakage.MISS_WITHOUT_DETAIL && !r.isHit()
                    ? DropResult.miss(r.requestedTokens(), r.reason(), null) : r;
        }

        @Override
        public void close() {
            s.close();
        }
    }
}
