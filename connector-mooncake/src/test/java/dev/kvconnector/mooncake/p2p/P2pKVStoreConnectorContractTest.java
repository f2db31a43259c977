package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.connector.DropSession;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.mooncake.te.TeTestTarget;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.testkit.KVStoreConnectorContract;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Every KVStoreConnector's contract over the peer-to-peer connector: P and D are two {@link TransferEngineConnector}s
 * with two engines in this JVM (the transfer engine test double, or the real library where {@code MOONCAKE_TE_LIB}
 * names it), so every byte crosses the engine's TCP transport. D registers the suite's destination; the hand-over is
 * D's {@code kv_transfer_params}, as the proxy carries them.
 */
class P2pKVStoreConnectorContractTest extends KVStoreConnectorContract {
    private PagedKVCache destination;

    @Override
    protected Pair open(KVLayout layout, PagedKVCache destination, long layerTimeoutMillis) {
        this.destination = destination;
        String uri = TeTestTarget.require().uri();
        TransferEngineConnector d = TransferEngineConnector.builder(uri, layout).registerCache(destination)
                .layerTimeoutMillis(layerTimeoutMillis).stagingBytes(1L << 20).build();
        try {
            return Pair.of(TransferEngineConnector.builder(uri, layout).stagingBytes(4L << 20).build(), d);
        } catch (RuntimeException e) {
            d.close();
            throw e;
        }
    }

    @Override
    protected void handOver(Pair pair, RequestTokens request, DropSession consumerSide) {
        ((TransferEngineConnector) pair.producer()).acceptDestination(((P2pDropSession) consumerSide)
                .transferParams());
    }

    /** P writes straight into D's blocks, so a byte flipped there after P's commit is a layer damaged in flight. */
    @Override
    protected void corruptLayer(Pair pair, RequestTokens request, BlockTable destinationBlocks, int layer) {
        MemorySegment k = destination.tensor(layer, 0);
        long at = destinationBlocks.slot(0) * destination.layout().bytesPerTokenPerTensor();
        k.set(ValueLayout.JAVA_BYTE, at, (byte) ~k.get(ValueLayout.JAVA_BYTE, at));
    }
}
