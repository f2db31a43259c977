package dev.kvconnector.lmcache.key;

import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.testkit.KeySchemeContract;
import java.util.List;

/** {@link KeySchemeContract} over both LMCache key schemes, in both formats and partial-chunk rules of lmcache-v0. */
class LmcacheKeySchemePropertiesTest extends KeySchemeContract {
    @Override
    protected List<KeyScheme> schemes() {
        return List.of(new LmcacheV0KeyScheme("vllm", true), new LmcacheV0KeyScheme("huggingface", true),
                new LmcacheV0KeyScheme("vllm", false), new LmcacheV1KeyScheme());
    }

    @Override
    protected List<KeyScheme> chainedSchemes() {
        return List.of(new LmcacheV0KeyScheme("vllm", true), new LmcacheV0KeyScheme("huggingface", true),
                new LmcacheV1KeyScheme());
    }

    @Override
    protected List<KeyScheme> engineHashSchemes() {
        return List.of(new LmcacheV0KeyScheme(), new LmcacheV0KeyScheme("vllm", false), new LmcacheV1KeyScheme());
    }

    @Override
    protected boolean dropsPartialChunk(KeyScheme scheme) {
        return scheme instanceof LmcacheV0KeyScheme lm && !lm.saveUnfullChunk();
    }
}
