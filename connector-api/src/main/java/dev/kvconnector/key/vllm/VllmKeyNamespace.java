package dev.kvconnector.key.vllm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * One rank namespace of vLLM V1's MooncakeStoreConnector keys ({@code PoolKey} in
 * {@code .../mooncake/store/layout.py}): a key is
 * {@code [<cache_prefix>@]<model_name>@tp_rank:<T>@pcp<P>@dcp<D>@pp_rank:<R>@group:<G>@<block hash hex>}. The
 * opt-in heterogeneous-TP {@code store_namespace} is not covered; it is empty by default.
 *
 * @param cachePrefix {@code kv_connector_extra_config["cache_prefix"]}; empty for none, and then the {@code @}
 *     after it is left out too
 * @param modelName the last path part of the model id ({@link #modelName(String)})
 * @param tpRank {@code T}: the TP rank divided by the replication factor
 * @param pcpRank {@code P}: the rank in the prefill-context-parallel group, 0 without PCP
 * @param dcpRank {@code D}: the rank in the decode-context-parallel group, 0 without DCP
 * @param ppRank {@code R}: the pipeline-parallel rank
 * @param group {@code G}: the KV-cache group, 0 for models with one group
 */
public record VllmKeyNamespace(String cachePrefix, String modelName, int tpRank, int pcpRank, int dcpRank, int ppRank,
                               int group) {
    /** Validates the fields. */
    public VllmKeyNamespace {
        if (cachePrefix == null || modelName == null || modelName.isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a vllm-v1 key namespace needs a model name and a"
                    + " cache prefix (empty for none)").build();
        }
        if (tpRank < 0 || pcpRank < 0 || dcpRank < 0 || ppRank < 0 || group < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "vllm-v1 key namespace: tp_rank=" + tpRank + " pcp="
                    + pcpRank + " dcp=" + dcpRank + " pp_rank=" + ppRank + " group=" + group + ": none may be negative")
                    .build();
        }
    }

    /**
     * vLLM's {@code model_config.model.rstrip("/").split("/")[-1]}: {@code meta-llama/Llama-3.1-8B} gives
     * {@code Llama-3.1-8B}. A model id that ends in {@code /} is refused rather than stripped, since it names a
     * directory rather than the served model, and an empty id is refused.
     */
    public static String modelName(String modelId) {
        if (modelId == null || modelId.isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "model id is empty")
                    .hint("pass the model id vLLM serves, such as meta-llama/Llama-3.1-8B").build();
        }
        if (modelId.endsWith("/")) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "model id '" + modelId + "' ends in '/'")
                    .hint("vLLM keys hold the last path part of the model id; pass it without the trailing '/', such as "
                            + "meta-llama/Llama-3.1-8B").build();
        }
        return modelId.substring(modelId.lastIndexOf('/') + 1);
    }

    /** The namespace's key prefix, without the {@code @} that comes before the hash. */
    public String prefix() {
        return (cachePrefix.isEmpty() ? "" : cachePrefix + "@") + modelName + "@tp_rank:" + tpRank + "@pcp" + pcpRank
                + "@dcp" + dcpRank + "@pp_rank:" + ppRank + "@group:" + group;
    }

    /** The key of the block whose hash is {@code hashHex} (lower-case hex of the digest) in this namespace. */
    public String key(String hashHex) {
        return prefix() + "@" + hashHex;
    }
}
