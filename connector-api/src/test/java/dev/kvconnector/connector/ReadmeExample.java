package dev.kvconnector.connector;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.util.stream.IntStream;

/** Inserts a 300-token request from a producer's paged cache and drop-selects it into a consumer's. */
public final class ReadmeExample {
    public static void main(String[] args) {
        System.out.println(run());
    }

    static DropResult run() {
        KVLayout layout = KVLayout.preset("qwen2.5-0.5b");           // or your model's: new KVLayout(...)
        int tokens = 300;
        int[] tokenIds = IntStream.range(1000, 1000 + tokens).toArray(); // the prompt, from your tokenizer
        int blockSize = 16;                                             // tokens per block of the paged caches
        try (Arena arena = Arena.ofConfined();
             // An engine wraps its own cache memory with PagedKVCache.wrap; here each side allocates 40 blocks.
             PagedKVCache pagedCache = PagedKVCache.allocate(layout, 40);
             PagedKVCache myCache = PagedKVCache.allocate(layout, 40);
             KVStoreConnector kv = KVStoreConnector.builder("memory:?capacity=1GiB", layout)
                     .modelId("Qwen/Qwen2.5-0.5B").build()) {
            // The request's blocks: 19 blocks of 16 tokens hold its 300 tokens, in each cache at its own place.
            BlockTable blockTable = new BlockTable(IntStream.range(0, 19).toArray(), blockSize, tokens);
            BlockTable myBlockTable = new BlockTable(IntStream.range(21, 40).toArray(), blockSize, tokens);
            TensorSpec hidden = TensorSpec.of(layout.dtype(), tokens, layout.hiddenSize());
            Tensor hiddenStates = Tensor.host(hidden, arena.allocate(hidden.byteSize()));  // [T, hidden]
            Tensor myHidden = Tensor.host(hidden, arena.allocate(hidden.byteSize()));

            RequestTokens prompt = RequestTokens.of(tokenIds);

            // Prefill (producer): put each layer as it is computed, then the hidden states, then commit.
            try (InsertSession insert = kv.beginInsert(prompt)) {
                for (int layer = 0; layer < layout.numLayers(); layer++) {
                    insert.putLayer(layer, pagedCache, blockTable);   // read now, stored by the connector
                }
                insert.putHidden(hiddenStates);
                insert.commit();                                      // manifests last: the entry becomes visible
            }                                                         // closing without commit aborts and removes

            // Decode (consumer): read the longest committed prefix into its own paged cache, then drop it.
            DropResult r = kv.dropSelect(prompt, DropTarget.paged(myCache, myBlockTable).withHidden(myHidden));
            if (!r.isComplete()) {
                System.out.println("recomputing: " + r.reason() + " (" + r.detail() + ")");
            }
            return r;
        }
    }
}
