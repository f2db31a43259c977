package dev.kvconnector.mooncake.p2p;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Where a decode instance (D) wants one request's KV: its engine, its transfer-engine segment, the blocks of its
 * registered paged cache that receive the request, and the addresses P writes to. It travels from D to P in
 * {@code kv_transfer_params}, with vLLM V1's names where they fit:
 *
 * <table>
 *   <caption>fields</caption>
 *   <tr><th>field</th><th>meaning</th></tr>
 *   <tr><td>{@code transfer_id}</td><td>the transfer (the request's namespace on both sides)</td></tr>
 *   <tr><td>{@code remote_engine_id}</td><td>D's engine id</td></tr>
 *   <tr><td>{@code remote_host}, {@code remote_port}</td><td>D's segment, {@code host:port} (P2PHANDSHAKE)</td></tr>
 *   <tr><td>{@code remote_block_ids}</td><td>D's blocks, in token order</td></tr>
 *   <tr><td>{@code kvc_tokens}</td><td>the request's prompt tokens</td></tr>
 *   <tr><td>{@code kvc_layout}</td><td>D's layout fingerprint ({@link KVLayout#fingerprintHex()})</td></tr>
 *   <tr><td>{@code kvc_num_blocks}</td><td>blocks per tensor in D's cache: every block id is below it</td></tr>
 *   <tr><td>{@code kvc_cache_addrs}</td><td>D's base address of each layer's tensors, {@code [layer][tensor]}
 *       flattened (the engine cannot look a peer's address up, as vLLM's handshake carries it)</td></tr>
 *   <tr><td>{@code kvc_hidden_addr}, {@code kvc_hidden_bytes}</td><td>D's landing area for the hidden states,
 *       or 0 when D takes none</td></tr>
 *   <tr><td>{@code kvc_from_layer}</td><td>the first layer P writes (absent: 0): D already accepted the layers before
 *       it from a P the prefill moved away from ({@link P2pDropSession#moveProducer}); they must not be
 *       overwritten</td></tr>
 *   <tr><td>{@code kvc_generation}</td><td>how many times the prefill moved before this destination was sent
 *       (absent: 0); P stamps every message with it, and D refuses a message of another generation, so that a P the
 *       prefill moved away from is never taken for the producer</td></tr>
 * </table>
 *
 * @param transferId the transfer id
 * @param engineId D's engine id
 * @param segment D's transfer-engine segment name
 * @param blockIds D's block ids, in token order (not copied: treat as immutable)
 * @param tokens the request's prompt tokens
 * @param layoutFingerprint D's layout fingerprint, hex
 * @param numBlocks blocks per tensor in D's cache
 * @param cacheAddrs base address of each of D's cache tensors, {@code layer * tensorsPerLayer + tensor}
 * @param hiddenAddr D's hidden-state landing address, 0 for none
 * @param hiddenBytes bytes of the hidden states D expects, 0 for none
 * @param fromLayer the first layer P writes; P puts the layers before it without writing them
 * @param generation the producer generation this destination is for ({@link P2pDropSession#moveProducer})
 */
public record P2pDestination(String transferId, String engineId, String segment, int[] blockIds, int tokens,
                             String layoutFingerprint, int numBlocks, long[] cacheAddrs, long hiddenAddr,
                             long hiddenBytes, int fromLayer, int generation) {
    static final String TOKENS = "kvc_tokens";
    static final String LAYOUT = "kvc_layout";
    static final String NUM_BLOCKS = "kvc_num_blocks";
    static final String CACHE_ADDRS = "kvc_cache_addrs";
    static final String HIDDEN_ADDR = "kvc_hidden_addr";
    static final String HIDDEN_BYTES = "kvc_hidden_bytes";
    static final String FROM_LAYER = "kvc_from_layer";
    static final String GENERATION = "kvc_generation";

    /** The {@code kv_transfer_params} that carry this destination. */
    public KVTransferParams toParams() {
        JsonNodeFactory json = JsonNodeFactory.instance;
        ArrayNode addrs = json.arrayNode();
        for (long a : cacheAddrs) {
            addrs.add(a);
        }
        int colon = segment.lastIndexOf(':');
        KVTransferParams.Builder b = KVTransferParams.builder().transferId(transferId).remoteEngineId(engineId)
                .remoteBlockIds(Arrays.stream(blockIds).boxed().toList())
                .doRemotePrefill(true);
        if (colon > 0 && isPort(segment.substring(colon + 1))) {
            b.remoteHost(segment.substring(0, colon)).remotePort(Integer.parseInt(segment.substring(colon + 1)));
        } else {
            b.remoteHost(segment);
        }
        b.unknownField(TOKENS, json.numberNode(tokens)).unknownField(LAYOUT, json.textNode(layoutFingerprint))
                .unknownField(NUM_BLOCKS, json.numberNode(numBlocks)).unknownField(CACHE_ADDRS, addrs)
                .unknownField(HIDDEN_ADDR, json.numberNode(hiddenAddr))
                .unknownField(HIDDEN_BYTES, json.numberNode(hiddenBytes));
        if (fromLayer != 0) {
            b.unknownField(FROM_LAYER, json.numberNode(fromLayer));
        }
        if (generation != 0) {
            b.unknownField(GENERATION, json.numberNode(generation));
        }
        return b.build();
    }

    private static boolean isPort(String s) {
        return !s.isEmpty() && s.length() <= 5 && s.chars().allMatch(Character::isDigit)
                && Integer.parseInt(s) <= 65535;
    }

    /**
     * Reads a destination from {@code kv_transfer_params}.
     *
     * @throws KVException {@code INVALID_ARGUMENT} naming the first field that is missing or of the wrong type
     */
    public static P2pDestination fromParams(KVTransferParams p) {
        Map<String, JsonNode> extra = p.unknownFields();
        String tid = require(p.transferId(), "transfer_id");
        String host = require(p.remoteHost(), "remote_host");
        List<Integer> blocks = require(p.remoteBlockIds(), "remote_block_ids");
        JsonNode addrs = extra.get(CACHE_ADDRS);
        if (addrs == null || !addrs.isArray()) {
            throw missing(CACHE_ADDRS, tid, "an array of D's tensor base addresses");
        }
        long[] cache = new long[addrs.size()];
        for (int i = 0; i < cache.length; i++) {
            if (!addrs.get(i).canConvertToLong()) {
                throw missing(CACHE_ADDRS, tid, "integers (element " + i + " is " + addrs.get(i) + ")");
            }
            cache[i] = addrs.get(i).asLong();
        }
        JsonNode layout = extra.get(LAYOUT);
        if (layout == null || !layout.isTextual()) {
            throw missing(LAYOUT, tid, "D's layout fingerprint, hex text");
        }
        return new P2pDestination(tid, p.remoteEngineId() == null ? host : p.remoteEngineId(),
                p.remotePort() == null ? host : host + ":" + p.remotePort(),
                blocks.stream().mapToInt(Integer::intValue).toArray(), (int) number(extra, TOKENS, tid),
                layout.asText(), (int) number(extra, NUM_BLOCKS, tid), cache, number(extra, HIDDEN_ADDR, tid),
                number(extra, HIDDEN_BYTES, tid), optionalInt(extra, FROM_LAYER, tid),
                optionalInt(extra, GENERATION, tid));
    }

    /** An optional non-negative count, 0 when absent; a value beyond {@code int} reads as its largest. */
    private static int optionalInt(Map<String, JsonNode> extra, String field, String tid) {
        return extra.containsKey(field) ? (int) Math.min(number(extra, field, tid), Integer.MAX_VALUE) : 0;
    }

    private static <T> T require(T value, String field) {
        if (value == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "kv_transfer_params has no '" + field
                    + "': it is not a peer-to-peer destination").operation("acceptDestination")
                    .hint("pass P the kv_transfer_params that D's P2pDropSession.transferParams() returned").build();
        }
        return value;
    }

    private static long number(Map<String, JsonNode> extra, String field, String tid) {
        JsonNode n = extra.get(field);
        if (n == null || !n.canConvertToLong() || n.asLong() < 0) {
            throw missing(field, tid, "a non-negative integer");
        }
        return n.asLong();
    }

    private static KVException missing(String field, String tid, String what) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "kv_transfer_params of transfer " + tid + ": field '"
                + field + "' must be " + what).operation("acceptDestination").key(tid).build();
    }

    /**
     * Checks this destination against P's layout before anything is written: the layout, the number of address
     * entries, every block id against D's cache, that the blocks hold the request's tokens, and the first layer.
     *
     * @throws KVException {@code INVALID_ARGUMENT} naming the block id or the first layer, {@code SHAPE_MISMATCH}
     *     naming the sizes, {@code INVALID_CONFIG} for another layout
     */
    public void check(KVLayout layout, String endpoint) {
        if (!layout.fingerprintHex().equals(layoutFingerprint)) {
            throw bad(ErrorCode.INVALID_CONFIG, "D's layout " + layoutFingerprint + " is not P's " + layout.name()
                    + " (" + layout.fingerprintHex() + ")", endpoint);
        }
        int tensors = layout.numLayers() * layout.tensorsPerLayer();
        if (cacheAddrs.length != tensors) {
            throw bad(ErrorCode.SHAPE_MISMATCH, "D sent " + cacheAddrs.length + " cache addresses, the layout has "
                    + layout.numLayers() + " layers x " + layout.tensorsPerLayer() + " tensors = " + tensors, endpoint);
        }
        for (int i = 0; i < blockIds.length; i++) {
            if (blockIds[i] < 0 || blockIds[i] >= numBlocks) {
                throw bad(ErrorCode.INVALID_ARGUMENT, "block id " + blockIds[i] + " (index " + i + " of "
                        + blockIds.length + ") is outside D's cache of " + numBlocks + " blocks", endpoint);
            }
        }
        if (fromLayer < 0 || fromLayer > layout.numLayers()) {
            throw bad(ErrorCode.INVALID_ARGUMENT, FROM_LAYER + " " + fromLayer + " is outside 0.." + layout.numLayers(),
                    endpoint);
        }
        long capacity = (long) blockIds.length * layout.blockSize();
        if (tokens < 1 || capacity < tokens || capacity - tokens >= layout.blockSize()) {
            throw bad(ErrorCode.SHAPE_MISMATCH, blockIds.length + " blocks of " + layout.blockSize()
                    + " tokens do not fit a request of " + tokens + " tokens", endpoint);
        }
    }

    private KVException bad(ErrorCode code, String detail, String endpoint) {
        return KVException.of(code, "destination of transfer " + transferId + " from " + segment + ": " + detail)
                .store(endpoint).operation("acceptDestination").key(transferId)
                .hint("D's kv_transfer_params must come unchanged from D's P2pDropSession.transferParams()").build();
    }

    @Override
    public String toString() {
        return "P2pDestination[" + transferId + " -> " + segment + ", " + blockIds.length + " blocks, " + tokens
                + " tokens" + (fromLayer == 0 ? "" : ", from layer " + fromLayer)
                + (generation == 0 ? "" : ", generation " + generation) + "]";
    }
}
