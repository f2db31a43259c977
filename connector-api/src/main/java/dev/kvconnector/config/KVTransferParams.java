package dev.kvconnector.config;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * The per-request {@code kv_transfer_params} object that a proxy attaches to a completion request and a connector
 * reads: which transfer this is, which store holds it and under which keys. Immutable; build one with
 * {@link #builder()} or change one with {@link #toBuilder()}.
 *
 * <p>Fields (JSON names, all optional; absent and JSON null read as null, and null fields are left out of the JSON):
 * <ul>
 *   <li>kvconnector's: {@code request_id}, {@code transfer_id}, {@code store_uri}, {@code token_hashes} (strings),
 *       {@code keys} (strings), {@code role};</li>
 *   <li>vLLM V1's (NIXL style): {@code do_remote_decode}, {@code do_remote_prefill} (booleans),
 *       {@code remote_engine_id}, {@code remote_block_ids} (non-negative ints), {@code remote_host},
 *       {@code remote_port} (0..65535), {@code remote_request_id}, {@code tp_size} (at least 1);</li>
 *   <li>the early vLLM design's per-request form: {@code prefix_prompt_ids} (token ids), {@code kvcache_load_keys},
 *       {@code kvcache_store_keys} (strings). Its batch form, a list of lists, is refused.</li>
 * </ul>
 * Any other field is kept as it came and written back, so a proxy passes through what it does not know. A known
 * field of the wrong type is an {@link ErrorCode#INVALID_ARGUMENT} error naming the field and the expected type.
 *
 * <p>Over 400 lines because it is one wire object: each field's JSON name, its check and its builder method stay
 * together, so that a field is added in one place.
 */
public final class KVTransferParams {
    private static final String SUBJECT = "kv_transfer_params";
    private static final int MAX_PORT = 65535;
    private static final Set<String> FIELDS = Set.of("request_id", "transfer_id", "store_uri", "token_hashes", "keys",
            "role", "do_remote_decode", "do_remote_prefill", "remote_engine_id", "remote_block_ids", "remote_host",
            "remote_port", "remote_request_id", "tp_size", "prefix_prompt_ids", "kvcache_load_keys",
            "kvcache_store_keys");

    private final String requestId;
    private final String transferId;
    private final String storeUri;
    private final List<String> tokenHashes;
    private final List<String> keys;
    private final String role;
    private final Boolean doRemoteDecode;
    private final Boolean doRemotePrefill;
    private final String remoteEngineId;
    private final List<Integer> remoteBlockIds;
    private final String remoteHost;
    private final Integer remotePort;
    private final String remoteRequestId;
    private final Integer tpSize;
    private final List<Integer> prefixPromptIds;
    private final List<String> kvcacheLoadKeys;
    private final List<String> kvcacheStoreKeys;
    private final Map<String, JsonNode> unknownFields;

    private KVTransferParams(Builder b) {
        requestId = b.requestId;
        transferId = b.transferId;
        storeUri = b.storeUri;
        tokenHashes = copy(b.tokenHashes, "token_hashes");
        keys = copy(b.keys, "keys");
        role = b.role;
        doRemoteDecode = b.doRemoteDecode;
        doRemotePrefill = b.doRemotePrefill;
        remoteEngineId = b.remoteEngineId;
        remoteBlockIds = copy(b.remoteBlockIds, "remote_block_ids");
        remoteHost = b.remoteHost;
        remotePort = b.remotePort;
        remoteRequestId = b.remoteRequestId;
        tpSize = b.tpSize;
        prefixPromptIds = copy(b.prefixPromptIds, "prefix_prompt_ids");
        kvcacheLoadKeys = copy(b.kvcacheLoadKeys, "kvcache_load_keys");
        kvcacheStoreKeys = copy(b.kvcacheStoreKeys, "kvcache_store_keys");
        if (remotePort != null && (remotePort < 0 || remotePort > MAX_PORT)) {
            throw invalid("field 'remote_port' must be an integer in [0, 65535], got " + remotePort);
        }
        if (tpSize != null && tpSize < 1) {
            throw invalid("field 'tp_size' must be an integer >= 1, got " + tpSize);
        }
        if (remoteBlockIds != null && remoteBlockIds.stream().anyMatch(id -> id < 0)) {
            throw invalid("field 'remote_block_ids' must hold non-negative block ids");
        }
        Map<String, JsonNode> unknown = new LinkedHashMap<>();
        b.unknownFields.forEach((name, value) -> {
            if (FIELDS.contains(name)) {
                throw invalid("'" + name + "' is a known field; set it through its own builder method");
            }
            unknown.put(name, value == null ? JsonFields.MAPPER.nullNode() : value.deepCopy());
        });
        unknownFields = Collections.unmodifiableMap(unknown);
    }

    private static <T> List<T> copy(List<T> list, String field) {
        if (list == null) {
            return null;
        }
        if (list.stream().anyMatch(Objects::isNull)) {
            throw invalid("field '" + field + "' must not hold null elements");
        }
        return List.copyOf(list);
    }

    private static KVException invalid(String detail) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, SUBJECT + ": " + detail).build();
    }

    /** A builder with every field unset. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this object's fields, unknown fields included. */
    public Builder toBuilder() {
        Builder b = new Builder()
                .requestId(requestId).transferId(transferId).storeUri(storeUri).tokenHashes(tokenHashes).keys(keys)
                .role(role).doRemoteDecode(doRemoteDecode).doRemotePrefill(doRemotePrefill)
                .remoteEngineId(remoteEngineId).remoteBlockIds(remoteBlockIds).remoteHost(remoteHost)
                .remotePort(remotePort).remoteRequestId(remoteRequestId).tpSize(tpSize)
                .prefixPromptIds(prefixPromptIds).kvcacheLoadKeys(kvcacheLoadKeys).kvcacheStoreKeys(kvcacheStoreKeys);
        unknownFields.forEach(b::unknownField);
        return b;
    }

    /** Parses a {@code kv_transfer_params} JSON object. */
    public static KVTransferParams fromJson(String json) {
        return fromJsonNode(JsonFields.parseObject(json, SUBJECT, ErrorCode.INVALID_ARGUMENT));
    }

    /** Reads a {@code kv_transfer_params} JSON object; the node is not kept or changed. */
    public static KVTransferParams fromJsonNode(JsonNode json) {
        ObjectNode node = JsonFields.requireObject(json, SUBJECT, ErrorCode.INVALID_ARGUMENT);
        JsonFields f = new JsonFields(node, SUBJECT, ErrorCode.INVALID_ARGUMENT);
        Builder b = builder()
                .requestId(f.string("request_id"))
                .transferId(f.string("transfer_id"))
                .storeUri(f.string("store_uri"))
                .tokenHashes(f.strings("token_hashes"))
                .keys(f.strings("keys"))
                .role(f.string("role"))
                .doRemoteDecode(f.bool("do_remote_decode"))
                .doRemotePrefill(f.bool("do_remote_prefill"))
                .remoteEngineId(f.string("remote_engine_id"))
                .remoteBlockIds(f.ints("remote_block_ids", 0, Integer.MAX_VALUE))
                .remoteHost(f.string("remote_host"))
                .remotePort(f.integer("remote_port", 0, MAX_PORT, false))
                .remoteRequestId(f.string("remote_request_id"))
                .tpSize(f.integer("tp_size", 1, Integer.MAX_VALUE, false))
                .prefixPromptIds(f.ints("prefix_prompt_ids", Integer.MIN_VALUE, Integer.MAX_VALUE))
                .kvcacheLoadKeys(f.strings("kvcache_load_keys"))
                .kvcacheStoreKeys(f.strings("kvcache_store_keys"));
        node.properties().forEach(e -> {
            if (!FIELDS.contains(e.getKey())) {
                b.unknownField(e.getKey(), e.getValue());
            }
        });
        return b.build();
    }

    /** The JSON object: known fields first, in a fixed order, then unknown fields in the order they came. */
    public ObjectNode toJsonNode() {
        ObjectNode o = JsonFields.MAPPER.createObjectNode();
        putIfSet(o, "request_id", requestId);
        putIfSet(o, "transfer_id", transferId);
        putIfSet(o, "store_uri", storeUri);
        putIfSet(o, "token_hashes", tokenHashes);
        putIfSet(o, "keys", keys);
        putIfSet(o, "role", role);
        putIfSet(o, "do_remote_decode", doRemoteDecode);
        putIfSet(o, "do_remote_prefill", doRemotePrefill);
        putIfSet(o, "remote_engine_id", remoteEngineId);
        putIfSet(o, "remote_block_ids", remoteBlockIds);
        putIfSet(o, "remote_host", remoteHost);
        putIfSet(o, "remote_port", remotePort);
        putIfSet(o, "remote_request_id", remoteRequestId);
        putIfSet(o, "tp_size", tpSize);
        putIfSet(o, "prefix_prompt_ids", prefixPromptIds);
        putIfSet(o, "kvcache_load_keys", kvcacheLoadKeys);
        putIfSet(o, "kvcache_store_keys", kvcacheStoreKeys);
        unknownFields.forEach((name, value) -> o.set(name, value.deepCopy()));
        return o;
    }

    private static void putIfSet(ObjectNode o, String field, Object value) {
        if (value != null) {
            o.set(field, JsonFields.MAPPER.valueToTree(value));
        }
    }

    /** The JSON text; {@link #fromJson} reads it back to an equal object. */
    public String toJson() {
        return toJsonNode().toString();
    }

    /** The request id, or null. */
    public String requestId() {
        return requestId;
    }

    /** kvconnector's transfer id, which isolates this transfer's objects, or null. */
    public String transferId() {
        return transferId;
    }

    /** The store URI (it may hold credentials: log {@link StoreUri#masked()} of it, never the text), or null. */
    public String storeUri() {
        return storeUri;
    }

    /** Engine chunk hashes of the prompt, or null. */
    public List<String> tokenHashes() {
        return tokenHashes;
    }

    /** Store keys chosen by the proxy, or null. */
    public List<String> keys() {
        return keys;
    }

    /** The role the proxy assigned to the receiving instance (for example {@code kv_producer}), or null. */
    public String role() {
        return role;
    }

    /** vLLM V1: whether the decode runs elsewhere (sent to the prefill instance), or null. */
    public Boolean doRemoteDecode() {
        return doRemoteDecode;
    }

    /** vLLM V1: whether the prefill ran elsewhere (sent to the decode instance), or null. */
    public Boolean doRemotePrefill() {
        return doRemotePrefill;
    }

    /** vLLM V1: the prefill engine's id, or null. */
    public String remoteEngineId() {
        return remoteEngineId;
    }

    /** vLLM V1: the prefill engine's KV block ids for this request, or null. */
    public List<Integer> remoteBlockIds() {
        return remoteBlockIds;
    }

    /** vLLM V1: the prefill engine's host, or null. */
    public String remoteHost() {
        return remoteHost;
    }

    /** vLLM V1: the prefill engine's port, or null. */
    public Integer remotePort() {
        return remotePort;
    }

    /** vLLM V1: the request's id on the prefill engine, or null. */
    public String remoteRequestId() {
        return remoteRequestId;
    }

    /** vLLM V1: the prefill engine's tensor-parallel size, or null. */
    public Integer tpSize() {
        return tpSize;
    }

    /** Early vLLM design: the prompt's token ids, or null. */
    public List<Integer> prefixPromptIds() {
        return prefixPromptIds;
    }

    /** Early vLLM design: the keys the decode instance loads, or null. */
    public List<String> kvcacheLoadKeys() {
        return kvcacheLoadKeys;
    }

    /** Early vLLM design: the keys the prefill instance stores, or null. */
    public List<String> kvcacheStoreKeys() {
        return kvcacheStoreKeys;
    }

    /** Fields this class does not know, as they came, in their order; the nodes are copies. */
    public Map<String, JsonNode> unknownFields() {
        Map<String, JsonNode> copy = new LinkedHashMap<>();
        unknownFields.forEach((name, value) -> copy.put(name, value.deepCopy()));
        return Collections.unmodifiableMap(copy);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof KVTransferParams p && toJsonNode().equals(p.toJsonNode());
    }

    @Override
    public int hashCode() {
        return toJsonNode().hashCode();
    }

    /** The JSON form with the store URI's secrets masked and long lists summarised. */
    @Override
    public String toString() {
        ObjectNode o = toJsonNode();
        if (storeUri != null) {
            o.put("store_uri", maskedStoreUri(storeUri));
        }
        for (String list : List.of("token_hashes", "keys", "remote_block_ids", "prefix_prompt_ids",
                "kvcache_load_keys", "kvcache_store_keys")) {
            JsonNode v = o.get(list);
            if (v != null && v.size() > 8) {
                o.put(list, "<" + v.size() + " items>");
            }
        }
        return "KVTransferParams" + o;
    }

    private static String maskedStoreUri(String uri) {
        try {
            return StoreUri.parse(uri).masked();
        } catch (KVException e) {
            return "<unparseable store uri, " + uri.length() + " chars>";
        }
    }

    /** Builds a {@link KVTransferParams}; null means unset. Lists are copied. */
    public static final class Builder {
        private String requestId;
        private String transferId;
        private String storeUri;
        private List<String> tokenHashes;
        private List<String> keys;
        private String role;
        private Boolean doRemoteDecode;
        private Boolean doRemotePrefill;
        private String remoteEngineId;
        private List<Integer> remoteBlockIds;
        private String remoteHost;
        private Integer remotePort;
        private String remoteRequestId;
        private Integer tpSize;
        private List<Integer> prefixPromptIds;
        private List<String> kvcacheLoadKeys;
        private List<String> kvcacheStoreKeys;
        private final Map<String, JsonNode> unknownFields = new LinkedHashMap<>();

        private Builder() {
        }

        /** Sets {@code request_id}. */
        public Builder requestId(String v) {
            requestId = v;
            return this;
        }

        /** Sets {@code transfer_id}. */
        public Builder transferId(String v) {
            transferId = v;
            return this;
        }

        /** Sets {@code store_uri}. */
        public Builder storeUri(String v) {
            storeUri = v;
            return this;
        }

        /** Sets {@code token_hashes}. */
        public Builder tokenHashes(List<String> v) {
            tokenHashes = v;
            return this;
        }

        /** Sets {@code keys}. */
        public Builder keys(List<String> v) {
            keys = v;
            return this;
        }

        /** Sets {@code role}. */
        public Builder role(String v) {
            role = v;
            return this;
        }

        /** Sets {@code do_remote_decode}. */
        public Builder doRemoteDecode(Boolean v) {
            doRemoteDecode = v;
            return this;
        }

        /** Sets {@code do_remote_prefill}. */
        public Builder doRemotePrefill(Boolean v) {
            doRemotePrefill = v;
            return this;
        }

        /** Sets {@code remote_engine_id}. */
        public Builder remoteEngineId(String v) {
            remoteEngineId = v;
            return this;
        }

        /** Sets {@code remote_block_ids}. */
        public Builder remoteBlockIds(List<Integer> v) {
            remoteBlockIds = v;
            return this;
        }

        /** Sets {@code remote_host}. */
        public Builder remoteHost(String v) {
            remoteHost = v;
            return this;
        }

        /** Sets {@code remote_port}. */
        public Builder remotePort(Integer v) {
            remotePort = v;
            return this;
        }

        /** Sets {@code remote_request_id}. */
        public Builder remoteRequestId(String v) {
            remoteRequestId = v;
            return this;
        }

        /** Sets {@code tp_size}. */
        public Builder tpSize(Integer v) {
            tpSize = v;
            return this;
        }

        /** Sets {@code prefix_prompt_ids}. */
        public Builder prefixPromptIds(List<Integer> v) {
            prefixPromptIds = v;
            return this;
        }

        /** Sets {@code kvcache_load_keys}. */
        public Builder kvcacheLoadKeys(List<String> v) {
            kvcacheLoadKeys = v;
            return this;
        }

        /** Sets {@code kvcache_store_keys}. */
        public Builder kvcacheStoreKeys(List<String> v) {
            kvcacheStoreKeys = v;
            return this;
        }

        /** Sets a field this class does not know; it is written back as given (copied). */
        public Builder unknownField(String name, JsonNode value) {
            unknownFields.put(Objects.requireNonNull(name, "name"), value);
            return this;
        }

        /** Validates and builds. */
        public KVTransferParams build() {
            return new KVTransferParams(this);
        }
    }
}
