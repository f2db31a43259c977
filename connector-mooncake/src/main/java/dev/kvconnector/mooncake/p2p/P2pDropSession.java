package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.PagedLayers;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.ChecksummedCopy;
import dev.kvconnector.memory.WordSum;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.Tensor;
import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * D's side of one peer-to-peer transfer: the request's blocks in D's registered cache, waiting for P's layers. The
 * notification thread records what P announces ({@link #offer}); {@link #awaitLayer} checks a layer's bytes in D's
 * blocks against P's word sum on the caller's thread. {@link #result()} and {@link #close()} return only after P's
 * last message (commit or abort) or D's timeout, so D's blocks are the engine's again only when P writes no more.
 * Used by one thread, besides the notification thread and the one that moves the producer.
 *
 * <p>The producer is the sender of the first message of the current generation. When the prefill moves to another P
 * (the proxy retried it, {@link #moveProducer}), the producer so far is retired and the generation rises: messages of
 * an earlier generation, or from another sender than the producer, are refused and never touch a layer (their sender
 * is told once to stop), and the next sender of the new generation becomes the producer, which writes the layers
 * from the one {@link #moveProducer} returned on. With
 * {@link #producerMayMove()}, an abort from the producer retires it the same way and leaves the transfer waiting for
 * the next one, up to the layer timeout, instead of ending it.
 *
 * <p>Over 400 lines because what P announced, what D verified, the producer and its generation, the miss and the
 * end of the transfer are one piece of state under one lock, read by the notification thread, the engine's thread
 * and the thread that moves the producer; split apart, each part would need the others' lock.
 */
public final class P2pDropSession implements DropSession {
    private final TransferEngineConnector c;
    private final String tid;
    private final int tokens;
    private final DropTarget target;
    private final PagedKVCache cache;
    private final int[] blockIds;
    private final Tensor hidden;
    private final MemorySegment hiddenLanding;
    private final long layerBytes;
    private final long tokenBytes;
    private final BlockRuns runs;
    private final WordSum sum = new WordSum();
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final long[] announcedBytes;
    private final int[] announcedSums;
    private final boolean[] announced;
    private final boolean[] verified;
    private boolean hiddenAnnounced;
    private int hiddenSum;
    private boolean hiddenVerified;
    private String producer;
    /** Producers the prefill moved away from, and senders refused since: their messages are refused. */
    private final Set<String> retired = new HashSet<>(2);
    /**
     * The producer generation: how many times the prefill moved. The destination carries it, P stamps its messages
     * with it, and a message of another generation is refused: it comes from a P the prefill moved away from.
     */
    private int generation;
    private boolean mayMove;
    /** Why the last producer left while none has spoken since, for the timeout's message; else null. */
    private String producerLeft;
    /** The layer {@link #awaitLayer} is summing outside the lock, else -1: a move leaves it to the producer so far. */
    private int checking = -1;
    private boolean producerDone;
    private boolean committed;
    private long lastProgress;
    private DropResult miss;
    private boolean timedOut;
    private DropResult result;
    private boolean ended;
    private boolean released;

    P2pDropSession(TransferEngineConnector c, String tid, int tokens, DropTarget target, PagedLayers paged) {
        this.c = c;
        this.tid = tid;
        this.tokens = tokens;
        this.target = target;
        this.cache = paged.cache();
        KVLayout layout = c.layout;
        this.blockIds = BlockRuns.blockIds(paged.slots(), tokens, layout.blockSize(), tid, c.endpoint);
        this.tokenBytes = layout.bytesPerTokenPerTensor();
        this.runs = new BlockRuns(blockIds, layout.blockSize(), tokens);
        this.layerBytes = layout.layerBytes(tokens);
        this.hidden = target.hidden();
        this.hiddenLanding = hidden == null ? null : c.staging.acquire(hiddenBytes());
        int layers = layout.numLayers();
        this.announcedBytes = new long[layers];
        this.announcedSums = new int[layers];
        this.announced = new boolean[layers];
        this.verified = new boolean[layers];
        this.lastProgress = System.nanoTime();
    }

    private long hiddenBytes() {
        return hidden.spec().byteSize();
    }

    /** The transfer id (the request's namespace). */
    public String transferId() {
        return tid;
    }

    DropTarget target() {
        return target;
    }

    /**
     * What P needs to write this request into D: vLLM V1's {@code kv_transfer_params} names where they fit
     * ({@code remote_engine_id}, {@code remote_host}, {@code remote_port}, {@code remote_block_ids},
     * {@code transfer_id}) and kvconnector's {@code kvc_*} fields for the addresses ({@link P2pDestination}).
     */
    public KVTransferParams transferParams() {
        return destination(0).toParams();
    }

    /**
     * {@link #transferParams()} for a producer that writes the layers from {@code fromLayer} on only (the one
     * {@link #moveProducer} returned), then the hidden states and the commit.
     */
    public KVTransferParams transferParams(int fromLayer) {
        return destination(fromLayer).toParams();
    }

    /** {@link #transferParams()} as a record. */
    public P2pDestination destination() {
        return destination(0);
    }

    /** {@link #transferParams(int)} as a record. */
    public P2pDestination destination(int fromLayer) {
        KVLayout layout = c.layout;
        long[] addrs = new long[layout.numLayers() * layout.tensorsPerLayer()];
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                addrs[l * layout.tensorsPerLayer() + t] = cache.tensor(l, t).address();
            }
        }
        return new P2pDestination(tid, c.engineId, c.engine.segmentName(), blockIds.clone(), tokens,
                layout.fingerprintHex(), cache.numBlocks(), addrs, hiddenLanding == null ? 0 : hiddenLanding.address(),
                hidden == null ? 0 : hiddenBytes(), fromLayer, generationNow());
    }

    /** What became of a message from P ({@link #offer}). */
    enum Offer {
        /** Recorded. */
        ACCEPTED,
        /** The transfer has ended. */
        ENDED,
        /** The sender is not the transfer's producer: one it moved away from, or another peer. */
        NOT_PRODUCER,
        /** As {@link #NOT_PRODUCER}, and the first message refused from this sender: tell it to stop writing. */
        STOP_SENDER
    }

    private int generationNow() {
        lock.lock();
        try {
            return generation;
        } finally {
            lock.unlock();
        }
    }

    /** Records a message from P. Called by the notification thread. */
    Offer offer(P2pMessage m) {
        lock.lock();
        try {
            if (ended) {
                return Offer.ENDED;
            }
            if (retired.contains(m.sender())) {
                return Offer.NOT_PRODUCER;
            }
            if (m.generation() != generation || producer != null && !producer.equals(m.sender())) {
                retired.add(m.sender());
                return Offer.STOP_SENDER;
            }
            if (producer == null) {
                producer = m.sender();
                producerLeft = null;
            }
            lastProgress = System.nanoTime();
            switch (m.kind()) {
                case LAYER -> layerLanded(m);
                case HIDDEN -> hiddenLanded(m);
                case COMMIT -> {
                    producerDone = true;
                    if (m.a() != c.layout.numLayers()) {
                        bad("P committed " + m.a() + " layers, the layout has " + c.layout.numLayers());
                    }
                    committed = true;
                }
                case ABORT -> {
                    if (mayMove) {
                        retire("P " + producer + " aborted (" + m.text() + ") and no other P took over");
                    } else {
                        producerDone = true;
                        missOnce(MissReason.ABSENT, "P aborted: " + m.text());
                    }
                }
                default -> bad("unexpected " + m.kind());
            }
            changed.signalAll();
            return Offer.ACCEPTED;
        } finally {
            lock.unlock();
        }
    }

    private void layerLanded(P2pMessage m) {
        long layer = m.a();
        if (layer < 0 || layer >= announced.length) {
            bad("P announced layer " + layer + ", the layout has layers 0.." + (announced.length - 1));
        } else if (announced[(int) layer]) {
            bad("P announced layer " + layer + " twice");
        } else if (m.b() != layerBytes) {
            bad("P announced layer " + layer + " of " + m.b() + " bytes; the layout needs " + layerBytes
                    + " for " + tokens + " tokens");
        } else {
            announced[(int) layer] = true;
            announcedBytes[(int) layer] = m.b();
            announcedSums[(int) layer] = m.sum();
        }
    }

    private void hiddenLanded(P2pMessage m) {
        if (hidden == null) {
            bad("P sent hidden states this drop-select did not ask for");
        } else if (m.a() != hiddenBytes()) {
            bad("P announced hidden states of " + m.a() + " bytes; D's target holds " + hiddenBytes());
        } else {
            hiddenAnnounced = true;
            hiddenSum = m.sum();
        }
    }

    /**
     * D: the proxy may retry the prefill on another P and tell D ({@link #moveProducer}): from now on an abort from
     * the producer retires it and leaves the transfer waiting, up to the layer timeout from the abort, for another
     * producer, instead of ending it as an {@link MissReason#ABSENT} miss.
     */
    public void producerMayMove() {
        lock.lock();
        try {
            mayMove = true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * D: the prefill moved to another P. The producer so far (if it has spoken) is retired: it is told to stop
     * ({@code X}), and its later messages are refused. Layers accepted, and the one {@link #awaitLayer} is checking
     * now, stay as they are (the engine may be reading them); what was announced of the others is forgotten, so the
     * next producer (the next sender) writes them again, with the hidden states, and commits. The layer timeout
     * starts again.
     *
     * <p>The move starts a new producer generation, which the next destination carries ({@link #transferParams(int)})
     * and the next producer stamps on its messages: a P the prefill moved away from is refused, and told once to stop,
     * even if it had sent nothing before the move.
     *
     * @param why why the prefill moved, for the old producer's stop message
     * @return the first layer the next producer must write ({@link #transferParams(int)})
     * @throws KVException {@code CLOSED} naming the transfer when it has ended, or its producer committed, or it
     *     already missed: there is nothing left to move
     */
    public int moveProducer(String why) {
        String stop;
        int from;
        lock.lock();
        try {
            requireWaiting("moveProducer");
            stop = producer != null && !producerDone ? producer : null;
            from = 0;
            while (from < verified.length && (verified[from] || from == checking)) {
                from++;
            }
            for (int l = from; l < announced.length; l++) {
                announced[l] = false;
            }
            hiddenAnnounced = false;
            producerDone = false;
            generation++;
            retire("the prefill moved to another P (" + why + "), which has not written yet");
            lastProgress = System.nanoTime();
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        if (stop != null) {
            c.tell(stop, tid, P2pMessage.cancel(c.engine.segmentName(), "the prefill moved: " + why));
        }
        return from;
    }

    /**
     * {@inheritDoc} D: no P will write this transfer any more (the proxy gave up its prefill): a transfer still
     * waiting becomes an {@link MissReason#ABSENT} miss naming {@code why}, so that D recomputes without waiting for
     * its layer timeout. As after any miss, {@link #result()} tells a producer still writing to stop and waits for its
     * last word. False when the transfer has ended, its producer committed, or it already missed.
     */
    @Override
    public boolean abandon(String why) {
        lock.lock();
        try {
            if (ended || committed || miss != null) {
                return false;
            }
            missOnce(MissReason.ABSENT, "no P will write it: " + why);
            changed.signalAll();
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Throws unless the transfer still waits for a producer; the caller holds the lock. */
    private void requireWaiting(String op) {
        if (ended || committed || miss != null) {
            throw KVException.of(ErrorCode.CLOSED, "transfer " + tid + " on " + c.endpoint + " "
                    + (ended ? "has ended" : committed ? "is complete: " + producer + " committed every layer"
                    : "has missed (" + miss.reason() + ")") + "; there is no prefill left to move or give up")
                    .store(c.endpoint).operation(op).key(tid).build();
        }
    }

    /** Refuses the producer's later messages and waits for the next one; the caller holds the lock. */
    private void retire(String why) {
        if (producer != null) {
            retired.add(producer);
        }
        producer = null;
        producerLeft = why;
        lastProgress = System.nanoTime();
    }

    /** Bad input from P: a corrupt miss, and the cause to the error handler. */
    private void bad(String detail) {
        c.errors.onError("p2p transfer " + tid + " on " + c.endpoint, KVException.of(ErrorCode.PROTOCOL_ERROR,
                "transfer " + tid + " from " + producer + ": " + detail).store(c.endpoint).key(tid).build());
        missOnce(MissReason.CORRUPT, detail);
    }

    private void missOnce(MissReason reason, String detail) {
        if (miss == null) {
            miss = DropResult.miss(tokens, reason, "transfer " + tid + " from " + (producer == null
                    ? "P (no message yet)" : producer) + " into " + c.endpoint + ": " + detail);
        }
    }

    /**
     * Waits until layer {@code layer} has landed in D's blocks and its word sum matches P's.
     *
     * @return false on a miss ({@link #result()} says why): P aborted, a check failed, or no message came from P
     *     within the layer timeout
     */
    @Override
    public boolean awaitLayer(int layer) {
        if (layer < 0 || layer >= announced.length) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "layer " + layer + " outside 0.." + (announced.length - 1))
                    .store(c.endpoint).operation("awaitLayer").key(tid).build();
        }
        long waitStart = System.nanoTime();
        lock.lock();
        try {
            if (verified[layer]) {
                return true;
            }
            if (!waitUntil(layer)) {
                return false;
            }
            checking = layer;
        } finally {
            lock.unlock();
        }
        long start = System.nanoTime();
        int got = layerSum(layer);
        lock.lock();
        try {
            checking = -1;
            if (got != announcedSums[layer]) {
                missOnce(MissReason.CORRUPT, "layer " + layer + ": the word sum of the bytes in D's blocks is "
                        + Integer.toHexString(got) + ", P announced " + Integer.toHexString(announcedSums[layer])
                        + " (a half-written or damaged layer)");
                return false;
            }
            verified[layer] = true;
            long now = System.nanoTime();
            c.metrics.dropLayer(now - start, start - waitStart, announcedBytes[layer]);
            return miss == null;
        } finally {
            lock.unlock();
        }
    }

    /** What {@link #waitUntil} waits for, besides a layer (its index). */
    private static final int HIDDEN = -1;
    private static final int COMMIT = -2;

    /** Whether {@code what} (a layer, {@link #HIDDEN} or {@link #COMMIT}) has come; the caller holds the lock. */
    private boolean arrived(int what) {
        return what >= 0 ? announced[what] : what == HIDDEN ? hiddenAnnounced : committed;
    }

    private static String describe(int what) {
        return what >= 0 ? "layer " + what : what == HIDDEN ? "hidden states" : "commit";
    }

    /**
     * Waits, holding the lock, until {@code what} (a layer, {@link #HIDDEN} or {@link #COMMIT}) has come; false on a
     * miss, or on a timeout, which it records.
     */
    private boolean waitUntil(int what) {
        while (miss == null && !arrived(what)) {
            if (producerDone) {
                missOnce(MissReason.CORRUPT, "P ended the transfer without " + describe(what));
                return false;
            }
            long left = lastProgress + c.layerTimeoutNanos - System.nanoTime();
            if (left <= 0) {
                timedOut = true;
                missOnce(MissReason.TIMED_OUT, "no " + describe(what) + " within " + TimeUnit.NANOSECONDS.toMillis(
                        c.layerTimeoutNanos) + " ms of P's last message (" + (producerLeft != null ? producerLeft
                        : "did P die, or never get D's kv_transfer_params?") + ")");
                return false;
            }
            try {
                changed.awaitNanos(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                missOnce(MissReason.ABSENT, "interrupted while waiting for " + describe(what));
            }
        }
        return miss == null;
    }

    /**
     * After a miss, waits (holding the lock) for P's last message, for at most the layer timeout since P's latest:
     * until then P may still be writing into D's blocks. A producer retired meanwhile (its abort, while the producer
     * may move) has said its last word.
     */
    private void awaitProducerDone() {
        long left;
        while (producer != null && !producerDone
                && (left = lastProgress + c.layerTimeoutNanos - System.nanoTime()) > 0) {
            try {
                changed.awaitNanos(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /**
     * The word sum of the request's tokens of {@code layer} in D's blocks, in place, tensor by tensor, in token
     * order: one pass over the landed bytes, a run of consecutive blocks at a time.
     */
    private int layerSum(int layer) {
        sum.reset();
        for (int t = 0; t < c.layout.tensorsPerLayer(); t++) {
            MemorySegment seg = cache.tensor(layer, t);
            for (int r = 0; r < runs.count(); r++) {
                sum.update(seg, runs.firstSlot(r) * tokenBytes, runs.tokens(r) * tokenBytes);
            }
        }
        return sum.value();
    }

    /** Tokens of a transfer P has committed, else 0. */
    int committedTokens() {
        lock.lock();
        try {
            return committed && miss == null ? tokens : 0;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits for every layer, the hidden states (when the target has them) and P's commit; on a miss, for P's last
     * message or the timeout, after telling P to stop. Then D's blocks are the engine's again.
     */
    @Override
    public DropResult result() {
        if (result != null) {
            return result;
        }
        for (int l = 0; l < announced.length && miss == null; l++) {
            awaitLayer(l);
        }
        lock.lock();
        try {
            if (hidden != null && waitUntil(HIDDEN)) {
                sum.reset();
                ChecksummedCopy.copy(hiddenLanding, 0, hidden.segment(), 0, hiddenBytes(), sum);
                if (sum.value() != hiddenSum) {
                    missOnce(MissReason.CORRUPT, "hidden states: word sum " + Integer.toHexString(sum.value())
                            + ", P announced " + Integer.toHexString(hiddenSum));
                }
            }
            waitUntil(COMMIT);
            if (miss != null && producer != null && !producerDone) {
                String stop = P2pMessage.cancel(c.engine.segmentName(), miss.reason().name());
                lock.unlock();
                try {
                    c.tell(producer, tid, stop);
                } finally {
                    lock.lock();
                }
                if (!timedOut) {
                    awaitProducerDone();
                }
            }
            result = miss != null ? miss : DropResult.hit(tokens, tokens);
            end(result.isHit() ? "completed" : "ended with " + result.reason());
        } finally {
            lock.unlock();
        }
        release();
        c.metrics.result(result);
        return result;
    }

    private void end(String why) {
        ended = true;
        c.ended(this, why);
    }

    /** Ends the transfer at once (the connector is closing). */
    void cancel() {
        lock.lock();
        try {
            missOnce(MissReason.ABSENT, "the connector closed");
            result = miss;
            end("the connector closed");
        } finally {
            lock.unlock();
        }
        release();
    }

    synchronized void release() {
        if (hiddenLanding != null && !released) {
            released = true;
            c.staging.release(hiddenLanding);
        }
    }

    /** Waits for the transfer to end ({@link #result()}), without throwing its failure. */
    @Override
    public void close() {
        try {
            result();
        } catch (KVException e) {
            c.errors.onError("p2p drop-select " + tid + " on " + c.endpoint, e);
        }
    }
}
