package dev.kvconnector.lmcache.key;

import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.testkit.KeySchemeContract;
import java.util.List;
import java.util.Map;

/** {@link KeySchemeContract} over both LMCache key schemes: both formats of lmcache-v0, both partial-chunk rules. */
class LmcacheKeySchemePropertiesTest extends KeySchemeContract {
    @Override
    protected List<KeyScheme> schemes() {
        return List.of(new LmcacheV0KeyScheme("vllm", true), new LmcacheV0KeyScheme("huggingface", true),
                new LmcacheV0KeyScheme("vllm", false), new LmcacheV1KeyScheme(),
                new LmcacheV1KeyScheme(false, Map.of()));
    }

    @Override
    protected List<KeyScheme> chainedSchemes() {
        return List.of(new LmcacheV0KeyScheme("vllm", true), new LmcacheV0KeyScheme("huggingface", true),
                new LmcacheV1KeyScheme());
    }

    @Override
    protected List<KeyScheme> engineHashSchemes() {
        return List.of(new LmcacheV0KeyScheme(), new LmcacheV0KeyScheme("vllm", false), new LmcacheV1KeyScheme(),
                new LmcacheV1KeyScheme(false, Map.of()));
    }

    @Override
    protected boolean dropsPartialChunk(KeyScheme scheme) {
        return !((LmcacheKeyScheme) scheme).saveUnfullChunk();
    }
}
