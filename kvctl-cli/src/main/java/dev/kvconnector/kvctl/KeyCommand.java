package dev.kvconnector.kvctl;

import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * Prints the store keys of a prompt. {@code vllm-v0}: the KV key, then the hidden-state key. {@code lmcache-v0},
 * {@code lmcache-v1}: one key per chunk (v1 keys end with the layout's dtype). {@code kvc-v1}: one line per chunk
 * with the chunk's key prefix and its token range.
 */
@Command(name = "key", description = "Print the store keys of a prompt under a key scheme.")
final class KeyCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = "--scheme", defaultValue = KeySchemes.DEFAULT, description = "vllm-v0, lmcache-v0, lmcache-v1 or kvc-v1 (default)")
    String scheme;

    @Option(names = "--model", defaultValue = "model", description = "Model name (lmcache-v0, lmcache-v1, kvc-v1)")
    String model;

    @Option(names = "--layout", defaultValue = "llama3-8b", description = "Layout preset bound into kvc-v1 keys (its dtype into lmcache-v1 keys)")
    String layout;

    @Option(names = {"--tp-rank", "--worker-id"}, defaultValue = "0", description = "TP rank (LMCache worker id)")
    int rank;

    @Option(names = "--world-size", defaultValue = "1", description = "TP size (LMCache world size)")
    int worldSize;

    @Option(names = "--chunk-size", defaultValue = "256", description = "Tokens per chunk")
    int chunk;

    @Option(names = "--fmt", defaultValue = "vllm", description = "LMCache v0 format: vllm or huggingface")
    String fmt;

    @Option(names = "--namespace", description = "kvc-v1 namespace (transfer id)")
    String namespace;

    @ArgGroup(multiplicity = "1")
    Source source;

    static final class Source {
        @Option(names = "--tokens", description = "Token ids: 1,2,3") String tokens;
        @Option(names = "--tokens-file", description = "File of token ids") Path file;
    }

    @Override
    public Integer call() {
        int[] tokens = source.tokens != null ? TokenList.parse(source.tokens, "--tokens") : TokenList.fromFile(source.file);
        KeyScheme s = KeySchemes.byName(scheme);
        if (s instanceof dev.kvconnector.key.LmcacheV0KeyScheme) {
            s = new dev.kvconnector.key.LmcacheV0KeyScheme(fmt, true);
        }
        KeyContext ctx = new KeyContext(model, KVLayout.preset(layout), rank, Math.max(worldSize, rank + 1), chunk);
        RequestTokens req = RequestTokens.of(tokens);
        KeyPlan plan = s.plan(ctx, namespace == null ? req : req.inNamespace(namespace));
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
}
