package dev.kvconnector.demo;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.mooncake.p2p.TransferEngineConnector;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.Tensor;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * P's side of one transfer, where its prefill and D's destination meet. Every step runs under the object's
 * lock, so its insert session (not thread-safe) sees one thread at a time: the engine's, as layers are
 * computed, or the HTTP thread's, when the destination arrives.
 */
final class P2pOutgoing {
    private static final Logger LOG = LoggerFactory.getLogger(P2pOutgoing.class);

    private final String transferId;
    private final TransferEngineConnector p2p;
    private final KVStoreConnector connector;
    private final Map<String, P2pOutgoing> registry;
    private long deadlineNanos = System.nanoTime() + P2pTransport.HOLD_NANOS;
    private KVTransferParams destination;
    private int[] prompt;
    private PagedKVCache cache;
    private BlockTable table;
    private int computed;
    private int written;
    private boolean prefillEnded;
    private Tensor hidden;
    private InsertSession insert;
    private boolean committed;
    private boolean ended;
    /** Gives the blocks back, once the engine is done with them; null until then. */
    private Runnable free;

    /**
     * One transfer of {@code connector} (the P2P connector {@code p2p}, or a composite with it), listed in
     * {@code registry} under its id until it ends.
     */
    P2pOutgoing(String transferId, TransferEngineConnector p2p, KVStoreConnector connector,
                Map<String, P2pOutgoing> registry) {
        this.transferId = transferId;
        this.p2p = p2p;
        this.connector = connector;
        this.registry = registry;
    }

    /** Takes the prefill; false when this transfer just ended (dropped), so the caller makes a new one. */
    synchronized boolean prefill(int[] tokens, PagedKVCache c, BlockTable t) {
        if (ended) {
            return false;
        }
        if (prompt != null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "transfer " + transferId + " is already being "
                    + "prefilled here").operation("p2p prefill").key(transferId).build();
        }
        prompt = tokens;
        cache = c;
        table = t;
        return true;
    }

    /** The engine computed {@code layer} (in order); it goes to D at once when D's destination is here. */
    synchronized void layerComputed(int layer) {
        computed = layer + 1;
        advanceQuietly();
    }

    /**
     * The prefill ended; {@code hiddenStates} (null when the connector keeps none) stay valid until the engine's
     * {@link #engineDone}.
     */
    synchronized void prefillEnded(Tensor hiddenStates) {
        prefillEnded = true;
        hidden = hiddenStates;
        deadlineNanos = System.nanoTime() + P2pTransport.HOLD_NANOS;
        advanceQuietly();
    }

    /** The prefill failed: nothing more will be computed. */
    synchronized void prefillFailed(RuntimeException why) {
        end("the prefill failed: " + why);
    }

    /** The engine is done with the blocks: {@code freeBlocks} runs now, or when the transfer no longer reads them. */
    synchronized void engineDone(Runnable freeBlocks) {
        free = freeBlocks;
        if (ended) {
            freeBlocks.run();
        }
    }

    /** Takes D's destination; false when this transfer just ended (dropped), so the caller makes a new one. */
    synchronized boolean destination(KVTransferParams params) {
        if (ended) {
            return false;
        }
        if (destination != null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "transfer " + transferId + " already has a "
                    + "destination").operation("p2p send").key(transferId).build();
        }
        destination = params;
        return true;
    }

    /** Writes what the prefill has computed; the bytes sent when that ended the transfer, else -1. */
    synchronized long writeFromDestination() {
        advance();
        return committed ? bytes() : -1;
    }

    private long bytes() {
        return connector.layout().layerBytes(prompt.length) * (long) connector.layout().numLayers();
    }

    private void advanceQuietly() {
        try {
            advance();
        } catch (KVException e) {
            LOG.warn("transfer {}: writing to D failed; D recomputes: {}", transferId, e.getMessage());
        }
    }

    /** Writes what can be written: every layer computed, and at the end the hidden states and the commit. */
    private void advance() {
        if (ended || destination == null || prompt == null) {
            return;
        }
        try {
            if (insert == null) {
                p2p.acceptDestination(destination);
                insert = connector.beginInsert(RequestTokens.of(prompt).inNamespace(transferId));
            }
            while (written < computed) {
                insert.putLayer(written, cache, table);
                written++;
            }
            if (prefillEnded && written == connector.layout().numLayers()) {
                if (hidden != null) {
                    insert.putHidden(hidden);
                }
                insert.commit();
                committed = true;
                end(null);
            }
        } catch (KVException e) {
            end(e.getMessage());
            throw e;
        }
    }

    synchronized void expireIfIdle(long now) {
        if (!ended && insert == null && (prompt == null || prefillEnded) && now - deadlineNanos > 0) {
            drop((prompt == null ? "no prefill came for D's destination" : "D never asked for the KV")
                    + " within " + P2pTransport.HOLD_NANOS / 1_000_000_000L + " s");
        }
    }

    synchronized void drop(String why) {
        if (!ended && insert == null) {
            LOG.warn("transfer {}: {}; dropping it", transferId, why);
            end(why);
        }
    }

    /** Ends the transfer (an insert not committed is aborted, telling D) and frees what the engine is done with. */
    private void end(String failure) {
        if (ended) {
            return;
        }
        ended = true;
        registry.remove(transferId, this);
        if (insert != null) {
            if (failure != null) {
                LOG.warn("transfer {}: aborted: {}", transferId, failure);
            }
            try {
                insert.close();
            } catch (KVException e) {
                LOG.warn("transfer {}: aborting the insert failed: {}", transferId, e.getMessage());
            }
        }
        if (free != null) {
            free.run();
        }
    }
}
