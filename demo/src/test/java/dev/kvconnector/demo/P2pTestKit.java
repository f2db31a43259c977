package dev.kvconnector.demo;

import com.sun.net.httpserver.HttpServer;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.testkit.Segments;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;

/** What the peer-to-peer transport tests share: P's send endpoint alone, and a layer compared across two caches. */
final class P2pTestKit {
    private P2pTestKit() {
    }

    /** P's {@code POST /kv/p2p/send} alone, over a plain HTTP server, each status put in {@code answers}. */
    static HttpServer sendEndpoint(P2pTransport p, BlockingQueue<Integer> answers) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        s.createContext(P2pTransport.SEND_PATH, ex -> {
            try (ex) {
                long sent = p.destination(KVTransferParams.fromJson(new String(ex.getRequestBody().readAllBytes(),
                        StandardCharsets.UTF_8)));
                int status = sent >= 0 ? 200 : 202;
                ex.sendResponseHeaders(status, -1);
                answers.add(status);
            }
        });
        s.start();
        return s;
    }

    /** Whether {@code layer}'s first {@code tokens} tokens are the same through P's and D's block tables. */
    static boolean sameLayer(KVLayout layout, int tokens, int layer, PagedKVCache p, BlockTable pTable, PagedKVCache d,
                             BlockTable dTable) {
        try (Arena a = Arena.ofConfined()) {
            long bytes = tokens * layout.bytesPerTokenPerTensor();
            MemorySegment want = a.allocate(bytes);
            MemorySegment got = a.allocate(bytes);
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                p.gather(layer, t, pTable, 0, tokens, want, 0);
                d.gather(layer, t, dTable, 0, tokens, got, 0);
                if (!Segments.equal(want, got, bytes)) {
                    return false;
                }
            }
            return true;
        }
    }
}
