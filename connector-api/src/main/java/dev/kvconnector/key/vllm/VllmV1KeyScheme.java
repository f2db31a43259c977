package dev.kvconnector.key.vllm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * vLLM V1 {@code MooncakeStoreConnector}'s keys, so that kvconnector and vLLM V1 instances can share one Mooncake
 * store: one object per full block holding every layer, under
 * {@code [<cache_prefix>@]<model_name>@tp_rank:<T>@pcp<P>@dcp<D>@pp_rank:<R>@group:<G>@<hex>}
 * ({@link VllmKeyNamespace}), where {@code <hex>} is the block's vLLM hash ({@link VllmBlockHasher}) in lower-case
 * hex.
 *
 * <ul>
 *   <li>The block size in tokens is {@link KeyContext#chunkTokens()}: vLLM's {@code cache_config.block_size} times
 *       the DCP size. Block {@code i} covers tokens {@code [i*B, (i+1)*B)}; a trailing partial block gets no key,
 *       as vLLM neither saves nor looks one up.</li>
 *   <li>The model name is the last path part of {@link KeyContext#modelId()}. The TP rank and size are the
 *       context's; {@code T} is the TP rank divided by {@link VllmTpReplication#factor}, with MLA taken from the
 *       layout's {@link AttentionKind}.</li>
 *   <li>A request of tokens is hashed here; a request of engine chunk hashes ({@link RequestTokens#ofChunkHashes})
 *       uses them as vLLM's block hashes, already in hex, one per {@code hash_block_size} tokens.</li>
 *   <li>A namespace ({@link RequestTokens#inNamespace}) is refused: vLLM keys have no place for one.</li>
 * </ul>
 *
 * <p>A lookup counts a block as present only when every rank namespace that will load it holds it:
 * {@link #lookupNamespaces(KeyContext)} lists them, in vLLM's order.
 */
public final class VllmV1KeyScheme implements KeyScheme {
    /** This scheme's name. */
    public static final String NAME = "vllm-v1";

    private static final HexFormat HEX = HexFormat.of();

    private final VllmV1Options options;
    private final VllmBlockHasher hasher;

    /** The ServiceLoader instance: vLLM's defaults ({@link VllmV1Options#DEFAULTS}). */
    public VllmV1KeyScheme() {
        this(VllmV1Options.DEFAULTS);
    }

    /** A scheme for one vLLM deployment's settings. */
    public VllmV1KeyScheme(VllmV1Options options) {
        this.options = Objects.requireNonNull(options, "options");
        this.hasher = VllmBlockHasher.of(options.hash(), options.hashSeed());
    }

    /** The settings. */
    public VllmV1Options options() {
        return options;
    }

    @Override
    public String name() {
        return NAME;
    }

    /** vLLM V1 keys hold no request namespace. */
    @Override
    public boolean bindsNamespace() {
        return false;
    }

    @Override
    public Granularity granularity() {
        return Granularity.CHUNK;
    }

    @Override
    public KeyPlan plan(KeyContext context, RequestTokens request) {
        Objects.requireNonNull(context, "context");
        Objects.requireNonNull(request, "request");
        if (request.namespace() != null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "key scheme vllm-v1 cannot honour namespace '"
                            + request.namespace() + "': vLLM V1 keys hold no request namespace")
                    .operation("plan")
                    .hint("drop the namespace for vLLM V1 interop, or use kvc-v1, whose keys bind the namespace")
                    .build();
        }
        VllmKeyNamespace namespace = writerNamespace(context);
        return request.hasTokens()
                ? planTokens(namespace, context.chunkTokens(), request.tokens(), VllmExtraKeys.NONE)
                : planEngineHashes(namespace, context.chunkTokens(), request);
    }

    /** The keys of a request of tokens whose hashes carry extra keys (a LoRA name, a cache salt). */
    public KeyPlan plan(KeyContext context, int[] tokens, VllmExtraKeys extra) {
        Objects.requireNonNull(context, "context");
        return planTokens(writerNamespace(context), context.chunkTokens(), tokens, extra);
    }

    private KeyPlan planTokens(VllmKeyNamespace namespace, int blockTokens, int[] tokens, VllmExtraKeys extra) {
        int hashTokens = hashBlockTokens(blockTokens);
        List<String> hashes = hasher.blockHashes(tokens, hashTokens, extra).stream().map(HEX::formatHex).toList();
        return keys(namespace, blockTokens, hashTokens, hashes);
    }

    private static KeyPlan planEngineHashes(VllmKeyNamespace namespace, int blockTokens, RequestTokens request) {
        int hashTokens = request.chunkHashTokens();
        if (blockTokens % hashTokens != 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "engine block hashes cover " + hashTokens
                            + " tokens each, which does not divide the block size of " + blockTokens + " tokens")
                    .operation("plan").hint("vLLM's hash_block_size divides every group's block size").build();
        }
        String[] hashes = request.chunkHashes();
        int full = request.totalTokens() / hashTokens;
        List<String> fullHashes = new ArrayList<>(full);
        for (int i = 0; i < full; i++) {
            fullHashes.add(requireHex(i, hashes[i]));
        }
        return keys(namespace, blockTokens, hashTokens, fullHashes);
    }

    /**
     * The rank namespace this rank writes under: {@code T = tpRank / factor}; the DCP rank is the TP rank modulo
     * the DCP size (0 without DCP), the PCP rank 0 without PCP.
     */
    public VllmKeyNamespace writerNamespace(KeyContext context) {
        int factor = replicationFactor(context);
        int dcp = options.dcpSize() > 1 ? context.tpRank() % options.dcpSize() : 0;
        int pcp = options.pcpSize() > 1 ? options.pcpRank() : 0;
        return new VllmKeyNamespace(options.cachePrefix(), VllmKeyNamespace.modelName(context.modelId()),
                context.tpRank() / factor, pcp, dcp, options.ppRank(), options.group());
    }

    /**
     * Every rank namespace that must hold a block before a lookup counts it as a hit, in vLLM's order
     * ({@code _init_lookup_key_prefixes}): for each PCP rank, each TP rank, each PP rank. With DCP every TP rank
     * is listed, with its DCP rank; otherwise the {@code tp_size / factor} distinct key ranks, with DCP rank 0.
     * The result depends on the context's model and TP size, not on its TP rank.
     */
    public List<VllmKeyNamespace> lookupNamespaces(KeyContext context) {
        int tpSize = context.worldSize();
        int factor = replicationFactor(context);
        String model = VllmKeyNamespace.modelName(context.modelId());
        boolean dcp = options.dcpSize() > 1;
        int tpRanks = dcp ? tpSize : tpSize / factor;
        List<VllmKeyNamespace> out = new ArrayList<>(options.pcpSize() * tpRanks * options.ppSize());
        for (int pcp = 0; pcp < options.pcpSize(); pcp++) {
            for (int tp = 0; tp < tpRanks; tp++) {
                for (int pp = 0; pp < options.ppSize(); pp++) {
                    out.add(new VllmKeyNamespace(options.cachePrefix(), model, tp, pcp, dcp ? tp % options.dcpSize() : 0,
                            pp, options.group()));
                }
            }
        }
        return out;
    }

    /** The keys that must all exist for the block whose hash is {@code hashHex} to count as a hit. */
    public List<String> lookupKeys(KeyContext context, String hashHex) {
        return lookupNamespaces(context).stream().map(ns -> ns.key(hashHex)).toList();
    }

    /** {@link #lookupKeys} but this rank's own key. */
    @Override
    public List<String> peerLookupKeys(KeyContext context, ChunkKeys chunk) {
        String own = chunk.layerKey(0);
        return lookupKeys(context, chunk.hashHex()).stream().filter(k -> !k.equals(own)).toList();
    }

    /** The TP replication factor of this context: MLA from its layout, KV heads from the options or the layout. */
    public int replicationFactor(KeyContext context) {
        int tpSize = context.worldSize();
        if (options.dcpSize() > 1 && tpSize % options.dcpSize() != 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "dcp size " + options.dcpSize()
                    + " does not divide the TP size " + tpSize).hint("vLLM's DCP groups subdivide the TP group").build();
        }
        boolean mla = context.layout().kind() == AttentionKind.MLA;
        return VllmTpReplication.factor(mla, tpSize, mla ? 1 : totalKvHeads(context), options.dcpSize());
    }

    private int totalKvHeads(KeyContext context) {
        if (options.totalKvHeads() > 0) {
            return options.totalKvHeads();
        }
        if (context.layout().kvHeads() == 1 && context.worldSize() > 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "kv heads: a layout with 1 KV head per rank over TP size "
                            + context.worldSize() + " may be replicated (fewer KV heads than ranks) or not")
                    .operation("plan")
                    .hint("set the model's total_num_kv_heads in the vllm-v1 options (kvctl: --kv-heads)").build();
        }
        return context.layout().kvHeads() * context.worldSize();
    }

    private int hashBlockTokens(int blockTokens) {
        int hashTokens = options.hashBlockTokens() == 0 ? blockTokens : options.hashBlockTokens();
        if (blockTokens % hashTokens != 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "hash block size " + hashTokens
                    + " tokens does not divide the block size of " + blockTokens + " tokens")
                    .hint("vLLM's hash_block_size divides every group's block size").build();
        }
        return hashTokens;
    }

    private static KeyPlan keys(VllmKeyNamespace namespace, int blockTokens, int hashTokens, List<String> hashes) {
        int perBlock = blockTokens / hashTokens;
        int blocks = hashes.size() / perBlock;
        List<ChunkKeys> chunks = new ArrayList<>(blocks);
        for (int b = 0; b < blocks; b++) {
            String hex = hashes.get((b + 1) * perBlock - 1);
            chunks.add(new ChunkKeys(b, b * blockTokens, (b + 1) * blockTokens, hex, new String[] {namespace.key(hex)},
                    null, null));
        }
        return new KeyPlan(NAME, Granularity.CHUNK, chunks);
    }

    private static String requireHex(int index, String hash) {
        if (hash == null || hash.isEmpty() || !hash.chars().allMatch(c -> (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "engine block hash " + index + " is "
                            + (hash == null ? "null" : "'" + hash + "', not lower-case hex"))
                    .operation("plan").hint("pass vLLM's BlockHash.hex() for every full block").build();
        }
        return hash;
    }
}
