package dev.kvconnector.kvctl;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.key.vllm.VllmExtraKeys;
import dev.kvconnector.key.vllm.VllmHashAlgorithm;
import dev.kvconnector.key.vllm.VllmV1KeyScheme;
import dev.kvconnector.key.vllm.VllmV1Options;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.lmcache.key.LmcacheV0KeyScheme;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * Prints the store keys of a prompt. {@code vllm-v0}: the KV key, then the hidden-state key. {@code lmcache-v0},
 * {@code lmcache-v1}: one key per chunk (v1 keys end with the layout's dtype). {@code vllm-v1}: one key per full
 * block, in block order, and nothing else. {@code kvc-v1}: one line per chunk with the chunk's key prefix and its
 * token range.
 *
 * <p>Bad input (a block size below 1, a TP rank outside the TP size, a model id ending in {@code /}, an unknown
 * hash, an empty hash seed, a vllm-v1 option given to another scheme) is a usage error, exit code 2, naming the
 * option.
 */
@Command(name = "key", description = "Print the store keys of a prompt under a key scheme.")
final class KeyCommand implements Callable<Integer> {
    private static final int DEFAULT_CHUNK_TOKENS = KeyContext.DEFAULT_CHUNK_TOKENS;
    /** Options that only the vllm-v1 scheme reads; giving one to another scheme is an error, not a no-op. */
    private static final List<String> VLLM_V1_ONLY = List.of("--hash", "--hash-seed", "--cache-prefix", "--kv-heads",
            "--pcp-rank", "--pcp-size", "--dcp-size", "--pp-rank", "--pp-size", "--group", "--hash-block-size",
            "--lora-name", "--cache-salt");

    @Spec
    CommandSpec spec;

    @Option(names = "--scheme", defaultValue = KeySchemes.DEFAULT,
            description = "vllm-v1, vllm-v0, lmcache-v0, lmcache-v1 or kvc-v1 (default)")
    String scheme;

    @Option(names = "--model", defaultValue = "model",
            description = "Model id (lmcache-v0, lmcache-v1, kvc-v1; vllm-v1 keys its last path part)")
    String model;

    @Option(names = "--layout", defaultValue = "llama3-8b",
            description = "Layout preset bound into kvc-v1 keys (its dtype into lmcache-v1 keys); for vllm-v1 an MLA "
                    + "preset (deepseek-v3-mla) means MLA")
    String layout;

    @Option(names = {"--tp-rank", "--worker-id"}, defaultValue = "0", description = "TP rank (LMCache worker id)")
    int rank;

    @Option(names = {"--world-size", "--tp-size"}, defaultValue = "1", description = "TP size (LMCache world size)")
    int worldSize;

    @Option(names = {"--chunk-size", "--block-size"}, paramLabel = "TOKENS",
            description = "Tokens per chunk (default 256); for vllm-v1 the block size, required (vLLM's default is 16)")
    Integer chunk;

    @Option(names = "--fmt", defaultValue = "vllm", description = "LMCache v0 format: vllm or huggingface")
    String fmt;

    @Option(names = "--namespace", description = "kvc-v1 namespace (transfer id)")
    String namespace;

    @Option(names = "--hash", paramLabel = "ALGO", defaultValue = "sha256",
            description = "vllm-v1: prefix_caching_hash_algo, sha256 (default), sha256_cbor, xxhash or xxhash_cbor")
    String hash;

    @Option(names = "--hash-seed", paramLabel = "SEED", description = "vllm-v1: the PYTHONHASHSEED vLLM runs with (leave out when unset)")
    String hashSeed;

    @Option(names = "--cache-prefix", paramLabel = "PREFIX", defaultValue = "", description = "vllm-v1: kv_connector_extra_config cache_prefix")
    String cachePrefix;

    @Option(names = "--kv-heads", paramLabel = "HEADS", description = "vllm-v1: the model's total KV heads; required unless --layout is MLA")
    Integer kvHeads;

    @Option(names = "--pcp-rank", paramLabel = "RANK", defaultValue = "0", description = "vllm-v1: prefill context parallel rank")
    int pcpRank;

    @Option(names = "--pcp-size", paramLabel = "SIZE", defaultValue = "1", description = "vllm-v1: prefill context parallel size")
    int pcpSize;

    @Option(names = "--dcp-size", paramLabel = "SIZE", defaultValue = "1",
            description = "vllm-v1: decode context parallel size (the DCP rank is the TP rank modulo this)")
    int dcpSize;

    @Option(names = "--pp-rank", paramLabel = "RANK", defaultValue = "0", description = "vllm-v1: pipeline parallel rank")
    int ppRank;

    @Option(names = "--pp-size", paramLabel = "SIZE", defaultValue = "1", description = "vllm-v1: pipeline parallel size")
    int ppSize;

    @Option(names = "--group", paramLabel = "G", defaultValue = "0", description = "vllm-v1: KV-cache group")
    int group;

    @Option(names = "--hash-block-size", paramLabel = "TOKENS", defaultValue = "0",
            description = "vllm-v1: tokens per hashed block when it differs from the block size")
    int hashBlockSize;

    @Option(names = "--lora-name", paramLabel = "NAME", description = "vllm-v1: the request's LoRA adapter name")
    String loraName;

    @Option(names = "--cache-salt", paramLabel = "SALT", description = "vllm-v1: the request's cache_salt")
    String cacheSalt;

    @ArgGroup(multiplicity = "1")
    Source source;

    static final class Source {
        @Option(names = "--tokens", description = "Token ids: 1,2,3") String tokens;
        @Option(names = "--tokens-file", description = "File of token ids") Path file;
    }

    @Override
    public Integer call() {
        boolean vllmV1 = VllmV1KeyScheme.NAME.equals(scheme);
        refuseOptionsOfOtherSchemes(vllmV1);
        if (chunk != null && chunk < 1) {
            throw usage("--block-size (--chunk-size) is " + chunk + " tokens; it must be at least 1");
        }
        int[] tokens = source.tokens != null ? TokenList.parse(source.tokens, "--tokens") : TokenList.fromFile(source.file);
        KeyPlan plan = vllmV1 ? vllmV1Plan(tokens) : otherPlan(tokens);
        var out = spec.commandLine().getOut();
        for (ChunkKeys c : plan.chunks()) {
            if (plan.granularity() == Granularity.CHUNK_LAYER) {
                String prefix = c.manifestKey().substring(0, c.manifestKey().length() - 2);
                out.println(prefix + " tokens " + c.startToken() + ".." + c.endToken());
            } else {
                out.println(c.layerKeys()[0]);
                if (c.hiddenKey() != null) {
                    out.println(c.hiddenKey());
                }
            }
        }
        out.flush();
        return 0;
    }

    private KeyPlan otherPlan(int[] tokens) {
        KeyScheme s = KeySchemes.byName(scheme);
        if (s instanceof LmcacheV0KeyScheme) {
            s = new LmcacheV0KeyScheme(fmt, true);
        }
        int chunkTokens = chunk == null ? DEFAULT_CHUNK_TOKENS : chunk;
        KeyContext ctx = new KeyContext(model, KVLayout.preset(layout), rank, Math.max(worldSize, rank + 1), chunkTokens);
        RequestTokens req = RequestTokens.of(tokens);
        return s.plan(ctx, namespace == null ? req : req.inNamespace(namespace));
    }

    private KeyPlan vllmV1Plan(int[] tokens) {
        if (chunk == null) {
            throw usage("--block-size is required for --scheme vllm-v1: pass vLLM's block size in tokens"
                    + " (cache_config.block_size times the DCP size; vLLM's default is 16)");
        }
        if (worldSize < 1 || rank < 0 || rank >= worldSize) {
            throw usage("--tp-rank " + rank + " is outside --tp-size " + worldSize + " (need 0 <= rank < size)");
        }
        if (namespace != null) {
            throw usage("--namespace does not apply to --scheme vllm-v1: vLLM V1 keys hold no request namespace");
        }
        if (model.endsWith("/")) {
            throw usage("--model '" + model + "' ends in '/': vLLM keys hold the model id's last path part;"
                    + " pass it without the trailing '/'");
        }
        if (hashSeed != null && hashSeed.isEmpty()) {
            throw usage("--hash-seed is empty: pass the PYTHONHASHSEED vLLM runs with, or leave the option out when it is"
                    + " unset");
        }
        KVLayout kvLayout = KVLayout.preset(layout);
        if (kvLayout.kind() == AttentionKind.MHA && kvHeads == null) {
            throw usage("--kv-heads is required for --scheme vllm-v1 with an MHA/GQA --layout: the model's total KV"
                    + " heads decide which TP ranks share keys (Llama-3.1-8B has 8)");
        }
        if (kvHeads != null && kvHeads < 1) {
            throw usage("--kv-heads is " + kvHeads + "; it must be at least 1");
        }
        try {
            VllmV1Options options = VllmV1Options.DEFAULTS
                    .withHash(VllmHashAlgorithm.byName(hash, "--hash"), hashSeed)
                    .withCachePrefix(cachePrefix)
                    .withTotalKvHeads(kvHeads == null ? 0 : kvHeads)
                    .withPcp(pcpRank, pcpSize).withDcpSize(dcpSize).withPp(ppRank, ppSize).withGroup(group)
                    .withHashBlockTokens(hashBlockSize);
            KeyContext ctx = new KeyContext(model, kvLayout, rank, worldSize, chunk);
            return new VllmV1KeyScheme(options).plan(ctx, tokens, new VllmExtraKeys(loraName, cacheSalt));
        } catch (KVException e) {
            if (e.code() != ErrorCode.INVALID_ARGUMENT) {
                throw e;
            }
            throw usage(e.getMessage());
        }
    }

    private void refuseOptionsOfOtherSchemes(boolean vllmV1) {
        if (vllmV1) {
            return;
        }
        for (String name : VLLM_V1_ONLY) {
            if (spec.commandLine().getParseResult().hasMatchedOption(name)) {
                throw usage(name + " applies only to --scheme vllm-v1, not to --scheme " + scheme);
            }
        }
    }

    private ParameterException usage(String message) {
        return new ParameterException(spec.commandLine(), message);
    }
}
