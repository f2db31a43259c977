package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.mooncake.te.TransferBatch;
import dev.kvconnector.mooncake.te.TransferEngine;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * P, in the other process of {@link P2pTwoProcessTest}: computes the request's KV into its own paged cache and
 * inserts it into D through a {@link TransferEngineConnector}, given D's {@code kv_transfer_params}. Prints
 * {@code PUT i} after each layer, {@code COMMITTED} and {@code DONE}.
 *
 * <p>Arguments: mode, engine URI, delay between layers in ms, then {@code seed json} per transfer. Modes:
 * {@code produce} (each transfer on its own thread, all at once), {@code die} (two layers, then half of layer 2
 * written straight into D's blocks with no message, then {@code HALF}, then it waits to be killed).
 */
public final class P2pPeer {
    private P2pPeer() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        long delay = Long.parseLong(args[2]);
        try (TransferEngineConnector p = TransferEngineConnector.builder(args[1], P2pKv.LAYOUT)
                .layerTimeoutMillis(5000).stagingBytes(16L << 20).build()) {
            List<Thread> threads = new ArrayList<>();
            for (int i = 3; i + 1 < args.length; i += 2) {
                long seed = Long.parseLong(args[i]);
                KVTransferParams params = KVTransferParams.fromJson(args[i + 1]);
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        produce(p, params, seed, delay, mode.equals("die"));
                    } catch (Exception e) {
                        System.out.println("ERROR " + e);
                    }
                }));
            }
            for (Thread t : threads) {
                t.join();
            }
        }
        System.out.println("DONE");
    }

    private static void produce(TransferEngineConnector p, KVTransferParams params, long seed, long delay,
                                boolean die) throws InterruptedException {
        P2pDestination d = p.acceptDestination(params);
        BlockTable table = P2pKv.table(3, 2, d.blockIds().length, d.tokens());
        try (PagedKVCache cache = PagedKVCache.allocate(P2pKv.LAYOUT, P2pKv.CACHE_BLOCKS);
             Arena arena = Arena.ofShared()) {
            P2pKv.compute(cache, table, seed);
            int[] tokens = new int[d.tokens()];
            try (InsertSession insert = p.beginInsert(RequestTokens.of(tokens).inNamespace(d.transferId()))) {
                for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
                    if (die && l == 2) {
                        halfLayer(p.engine(), d, arena);
                        System.out.println("HALF");
                        Thread.sleep(60_000);
                    }
                    insert.putLayer(l, cache, table);
                    System.out.println("PUT " + d.transferId() + " " + l);
                    Thread.sleep(delay);
                }
                if (d.hiddenBytes() > 0) {
                    insert.putHidden(P2pKv.hidden(arena, d.tokens(), seed));
                }
                insert.commit();
                System.out.println("COMMITTED " + d.transferId());
            }
        }
    }

    /** Writes garbage over the first half of layer 2's K tensor in D's first block, and sends no message. */
    private static void halfLayer(TransferEngine engine, P2pDestination d, Arena arena) {
        long bytes = P2pKv.LAYOUT.blockSize() * P2pKv.LAYOUT.bytesPerTokenPerTensor() / 2;
        MemorySegment junk = arena.allocate(bytes, 4096);
        junk.fill((byte) 0x77);
        engine.register(junk, "cpu:0");
        long target = d.cacheAddrs()[2 * P2pKv.LAYOUT.tensorsPerLayer()]
                + (long) d.blockIds()[0] * P2pKv.LAYOUT.blockSize() * P2pKv.LAYOUT.bytesPerTokenPerTensor();
        try (TransferBatch batch = engine.newBatch(1)) {
            batch.write(junk, engine.openSegment(d.segment()), target, bytes);
            batch.submit();
            System.out.println("HALF-WRITE " + batch.await(10, TimeUnit.SECONDS));
        }
    }
}
