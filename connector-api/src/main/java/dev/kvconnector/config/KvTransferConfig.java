package dev.kvconnector.config;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * vLLM's {@code kv_transfer_config}, parsed and validated as vLLM validates it, so one JSON string configures both a
 * vLLM instance and a kvconnector engine.
 *
 * <p>Fields, in vLLM's JSON names, with defaults: {@code kv_connector} (null), {@code kv_role} ({@code kv_producer},
 * {@code kv_consumer} or {@code kv_both}; null), {@code kv_rank} (null), {@code kv_parallel_size} (1),
 * {@code kv_buffer_size} (1e9 bytes), {@code kv_buffer_device} ({@code cuda}), {@code kv_ip} ({@code 127.0.0.1}),
 * {@code kv_port} (14579), {@code kv_connector_extra_config} ({}), {@code kv_load_failure_policy}
 * ({@code recompute} or {@code fail}; {@code recompute}), and vLLM's {@code engine_id} and
 * {@code kv_connector_module_path} (null), accepted so that a config written for vLLM parses unchanged.
 *
 * <p>Validation, once, in the constructor: a connector without a role, an unknown role or policy, an unknown field
 * and a value of the wrong type are {@link ErrorCode#INVALID_CONFIG} errors that name the field and the expected
 * type. Like vLLM's pydantic config, numeric fields also accept numeric strings ({@code "kv_port": "21001"} appears in
 * vLLM's own examples). kvconnector also checks ranges vLLM leaves unchecked: ports in [1, 65535], a non-negative
 * rank, a parallel size of at least 1, and a buffer size in (0, 2^63) bytes.
 *
 * @param kvConnector the connector's name, or null when this instance transfers no KV
 * @param kvRole this instance's role, or null
 * @param kvRank this instance's rank among the {@code kvParallelSize} instances, or null
 * @param kvParallelSize instances taking part in KV transfer
 * @param kvBufferSize bytes that may be buffered before {@code insert} blocks
 * @param kvBufferDevice where the buffer lives ({@code cuda} or {@code cpu}), or null
 * @param kvIp the KV transfer address
 * @param kvPort the KV transfer port
 * @param kvConnectorExtraConfig connector-specific settings, deep and unmodifiable (Map, List, String, Long,
 *     BigInteger, Double, BigDecimal, Boolean, null)
 * @param kvLoadFailurePolicy what a consumer does when loading KV fails
 * @param engineId vLLM's engine id, or null
 * @param kvConnectorModulePath the Python module of an out-of-tree connector, or null
 */
public record KvTransferConfig(String kvConnector, Role kvRole, Integer kvRank, int kvParallelSize, double kvBufferSize,
                               String kvBufferDevice, String kvIp, int kvPort, Map<String, Object> kvConnectorExtraConfig,
                               LoadFailurePolicy kvLoadFailurePolicy, String engineId, String kvConnectorModulePath) {

    /** Default {@code kv_parallel_size}. */
    public static final int DEFAULT_PARALLEL_SIZE = 1;
    /** Default {@code kv_buffer_size}, bytes. */
    public static final double DEFAULT_BUFFER_SIZE = 1e9;
    /** Default {@code kv_buffer_device}. */
    public static final String DEFAULT_BUFFER_DEVICE = "cuda";
    /** Default {@code kv_ip}. */
    public static final String DEFAULT_IP = "127.0.0.1";
    /** Default {@code kv_port}. */
    public static final int DEFAULT_PORT = 14579;

    private static final String SUBJECT = "kv_transfer_config";
    private static final List<String> FIELDS = List.of("kv_connector", "engine_id", "kv_buffer_device",
            "kv_buffer_size", "kv_role", "kv_rank", "kv_parallel_size", "kv_ip", "kv_port",
            "kv_connector_extra_config", "kv_connector_module_path", "kv_load_failure_policy");
    private static final double MAX_BUFFER_BYTES = 0x1p63;

    /** A KV transfer role, as vLLM names it. */
    public enum Role {
        /** Runs prefills and stores their KV. */
        KV_PRODUCER("kv_producer"),
        /** Loads KV instead of running prefills. */
        KV_CONSUMER("kv_consumer"),
        /** Does both. */
        KV_BOTH("kv_both");

        private final String jsonName;

        Role(String jsonName) {
            this.jsonName = jsonName;
        }

        /** The name in JSON, such as {@code kv_producer}. */
        public String jsonName() {
            return jsonName;
        }

        /** The role with this JSON name; anything else is an {@code INVALID_CONFIG} error listing the roles. */
        public static Role fromJsonName(String name) {
            for (Role r : values()) {
                if (r.jsonName.equals(name)) {
                    return r;
                }
            }
            throw KVException.of(ErrorCode.INVALID_CONFIG, SUBJECT + ": unsupported kv_role '" + name + "'")
                    .hint("supported roles: kv_producer, kv_consumer, kv_both").build();
        }
    }

    /** What a consumer does when KV cannot be loaded. */
    public enum LoadFailurePolicy {
        /** Recompute the prefill locally (vLLM's default). */
        RECOMPUTE("recompute"),
        /** Fail the request. */
        FAIL("fail");

        private final String jsonName;

        LoadFailurePolicy(String jsonName) {
            this.jsonName = jsonName;
        }

        /** The name in JSON. */
        public String jsonName() {
            return jsonName;
        }

        /** The policy with this JSON name; anything else is an {@code INVALID_CONFIG} error. */
        public static LoadFailurePolicy fromJsonName(String name) {
            for (LoadFailurePolicy p : values()) {
                if (p.jsonName.equals(name)) {
                    return p;
                }
            }
            throw KVException.of(ErrorCode.INVALID_CONFIG, SUBJECT + ": unsupported kv_load_failure_policy '" + name + "'")
                    .hint("supported policies: recompute, fail").build();
        }
    }

    /** Validates every field and copies the extra config. */
    public KvTransferConfig {
        if (kvConnector != null && kvRole == null) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, SUBJECT + ": kv_connector '" + kvConnector
                    + "' is set but kv_role is not").hint("set kv_role to kv_producer, kv_consumer or kv_both").build();
        }
        if (kvRank != null && kvRank < 0) {
            throw invalid("kv_rank", "a non-negative integer", String.valueOf(kvRank));
        }
        if (kvParallelSize < 1) {
            throw invalid("kv_parallel_size", "an integer >= 1", String.valueOf(kvParallelSize));
        }
        if (!(kvBufferSize > 0 && kvBufferSize < MAX_BUFFER_BYTES)) {
            throw invalid("kv_buffer_size", "a number of bytes in (0, 2^63)", String.valueOf(kvBufferSize));
        }
        if (kvIp == null || kvIp.isBlank()) {
            throw invalid("kv_ip", "a host name or address", "an empty value");
        }
        if (kvPort < 1 || kvPort > 65535) {
            throw invalid("kv_port", "an integer in [1, 65535]", String.valueOf(kvPort));
        }
        Objects.requireNonNull(kvConnectorExtraConfig, "kvConnectorExtraConfig");
        kvConnectorExtraConfig = freeze(kvConnectorExtraConfig);
        Objects.requireNonNull(kvLoadFailurePolicy, "kvLoadFailurePolicy");
    }

    private static KVException invalid(String field, String expected, String got) {
        return KVException.of(ErrorCode.INVALID_CONFIG, SUBJECT + ": field '" + field + "' must be " + expected
                + ", got " + got).build();
    }

    private static Map<String, Object> freeze(Map<String, Object> extra) {
        try {
            return JsonFields.toFrozenMap(JsonFields.MAPPER.valueToTree(extra));
        } catch (IllegalArgumentException e) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, SUBJECT
                            + ": kv_connector_extra_config holds a value that cannot be written as JSON")
                    .hint("use only maps, lists, strings, numbers, booleans and null").cause(e).build();
        }
    }

    /** A builder with vLLM's defaults. */
    public static Builder builder() {
        return new Builder();
    }

    /** Parses a {@code kv_transfer_config} JSON object. */
    public static KvTransferConfig fromJson(String json) {
        return fromJsonNode(JsonFields.parseObject(json, SUBJECT, ErrorCode.INVALID_CONFIG));
    }

    /** Reads a {@code kv_transfer_config} JSON object. */
    public static KvTransferConfig fromJsonNode(JsonNode json) {
        JsonFields f = new JsonFields(JsonFields.requireObject(json, SUBJECT, ErrorCode.INVALID_CONFIG), SUBJECT,
                ErrorCode.INVALID_CONFIG);
        f.rejectUnknown(FIELDS);
        Builder b = builder()
                .kvConnector(f.string("kv_connector"))
                .kvRank(f.integer("kv_rank", 0, Integer.MAX_VALUE, true))
                .engineId(f.string("engine_id"))
                .kvConnectorModulePath(f.string("kv_connector_module_path"));
        if (f.isPresent("kv_buffer_device")) {
            b.kvBufferDevice(f.string("kv_buffer_device"));
        }
        String role = f.string("kv_role");
        if (role != null) {
            b.kvRole(Role.fromJsonName(role));
        }
        Integer parallel = nonNull(f, "kv_parallel_size", f.integer("kv_parallel_size", 1, Integer.MAX_VALUE, true));
        if (parallel != null) {
            b.kvParallelSize(parallel);
        }
        Double buffer = nonNull(f, "kv_buffer_size", f.number("kv_buffer_size", true));
        if (buffer != null) {
            b.kvBufferSize(buffer);
        }
        String ip = nonNull(f, "kv_ip", f.string("kv_ip"));
        if (ip != null) {
            b.kvIp(ip);
        }
        Integer port = nonNull(f, "kv_port", f.integer("kv_port", 1, 65535, true));
        if (port != null) {
            b.kvPort(port);
        }
        ObjectNode extra = nonNull(f, "kv_connector_extra_config", f.object("kv_connector_extra_config"));
        if (extra != null) {
            b.kvConnectorExtraConfig(JsonFields.toFrozenMap(extra));
        }
        String policy = nonNull(f, "kv_load_failure_policy", f.string("kv_load_failure_policy"));
        if (policy != null) {
            b.kvLoadFailurePolicy(LoadFailurePolicy.fromJsonName(policy));
        }
        return b.build();
    }

    /** vLLM types these fields without Optional, so an explicit JSON null is a type error, not "use the default". */
    private static <T> T nonNull(JsonFields f, String field, T value) {
        if (value == null && f.isExplicitNull(field)) {
            throw invalid(field, "a value (it has a default; leave the field out to use it)", "null");
        }
        return value;
    }

    /** The JSON object, fields in vLLM's order, null fields left out. */
    public ObjectNode toJsonNode() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kv_connector", kvConnector);
        m.put("engine_id", engineId);
        m.put("kv_buffer_device", kvBufferDevice);
        m.put("kv_buffer_size", kvBufferSize);
        m.put("kv_role", kvRole == null ? null : kvRole.jsonName());
        m.put("kv_rank", kvRank);
        m.put("kv_parallel_size", kvParallelSize);
        m.put("kv_ip", kvIp);
        m.put("kv_port", kvPort);
        m.put("kv_connector_extra_config", kvConnectorExtraConfig);
        m.put("kv_connector_module_path", kvConnectorModulePath);
        m.put("kv_load_failure_policy", kvLoadFailurePolicy.jsonName());
        m.values().removeIf(Objects::isNull);
        return JsonFields.MAPPER.valueToTree(m);
    }

    /** The JSON text; {@link #fromJson} reads it back to an equal config. */
    public String toJson() {
        return toJsonNode().toString();
    }

    /** Whether this instance takes part in KV transfer: a connector and a role are set (vLLM's is_kv_transfer_instance). */
    public boolean isKvTransferInstance() {
        return kvConnector != null && kvRole != null;
    }

    /** Whether this instance stores KV: a connector is set and the role is {@code kv_producer} or {@code kv_both}. */
    public boolean isProducer() {
        return kvConnector != null && (kvRole == Role.KV_PRODUCER || kvRole == Role.KV_BOTH);
    }

    /** Whether this instance loads KV: a connector is set and the role is {@code kv_consumer} or {@code kv_both}. */
    public boolean isConsumer() {
        return kvConnector != null && (kvRole == Role.KV_CONSUMER || kvRole == Role.KV_BOTH);
    }

    /** {@code kv_buffer_size} as whole bytes, rounded down. */
    public long kvBufferSizeBytes() {
        return (long) kvBufferSize;
    }

    /** A value of {@code kv_connector_extra_config}, or {@code defaultValue} when absent (vLLM's get_from_extra_config). */
    public Object extraConfig(String key, Object defaultValue) {
        return kvConnectorExtraConfig.containsKey(key) ? kvConnectorExtraConfig.get(key) : defaultValue;
    }

    /** Lists the extra config's keys, not its values, which may hold credentials. */
    @Override
    public String toString() {
        return "KvTransferConfig[kv_connector=" + kvConnector + ", kv_role=" + (kvRole == null ? null : kvRole.jsonName())
                + ", kv_rank=" + kvRank + ", kv_parallel_size=" + kvParallelSize + ", kv_buffer_size=" + kvBufferSize
                + ", kv_buffer_device=" + kvBufferDevice + ", kv_ip=" + kvIp + ", kv_port=" + kvPort
                + ", kv_connector_extra_config keys=" + Arrays.toString(kvConnectorExtraConfig.keySet().toArray())
                + ", kv_load_failure_policy=" + kvLoadFailurePolicy.jsonName() + ", engine_id=" + engineId
                + ", kv_connector_module_path=" + kvConnectorModulePath + "]";
    }

    /** Builds a {@link KvTransferConfig}, starting from vLLM's defaults; {@link #build()} validates. */
    public static final class Builder {
        private String kvConnector;
        private Role kvRole;
        private Integer kvRank;
        private int kvParallelSize = DEFAULT_PARALLEL_SIZE;
        private double kvBufferSize = DEFAULT_BUFFER_SIZE;
        private String kvBufferDevice = DEFAULT_BUFFER_DEVICE;
        private String kvIp = DEFAULT_IP;
        private int kvPort = DEFAULT_PORT;
        private Map<String, Object> kvConnectorExtraConfig = Map.of();
        private LoadFailurePolicy kvLoadFailurePolicy = LoadFailurePolicy.RECOMPUTE;
        private String engineId;
        private String kvConnectorModulePath;

        private Builder() {
        }

        /** Sets {@code kv_connector}. */
        public Builder kvConnector(String v) {
            kvConnector = v;
            return this;
        }

        /** Sets {@code kv_role}. */
        public Builder kvRole(Role v) {
            kvRole = v;
            return this;
        }

        /** Sets {@code kv_rank}. */
        public Builder kvRank(Integer v) {
            kvRank = v;
            return this;
        }

        /** Sets {@code kv_parallel_size}. */
        public Builder kvParallelSize(int v) {
            kvParallelSize = v;
            return this;
        }

        /** Sets {@code kv_buffer_size}, bytes. */
        public Builder kvBufferSize(double bytes) {
            kvBufferSize = bytes;
            return this;
        }

        /** Sets {@code kv_buffer_device}. */
        public Builder kvBufferDevice(String v) {
            kvBufferDevice = v;
            return this;
        }

        /** Sets {@code kv_ip}. */
        public Builder kvIp(String v) {
            kvIp = v;
            return this;
        }

        /** Sets {@code kv_port}. */
        public Builder kvPort(int v) {
            kvPort = v;
            return this;
        }

        /** Sets {@code kv_connector_extra_config}; values must be JSON-like (Map, List, String, Number, Boolean). */
        public Builder kvConnectorExtraConfig(Map<String, Object> v) {
            kvConnectorExtraConfig = v;
            return this;
        }

        /** Sets {@code kv_load_failure_policy}. */
        public Builder kvLoadFailurePolicy(LoadFailurePolicy v) {
            kvLoadFailurePolicy = v;
            return this;
        }

        /** Sets {@code engine_id}. */
        public Builder engineId(String v) {
            engineId = v;
            return this;
        }

        /** Sets {@code kv_connector_module_path}. */
        public Builder kvConnectorModulePath(String v) {
            kvConnectorModulePath = v;
            return this;
        }

        /** Validates and builds. */
        public KvTransferConfig build() {
            return new KvTransferConfig(kvConnector, kvRole, kvRank, kvParallelSize, kvBufferSize, kvBufferDevice, kvIp,
                    kvPort, kvConnectorExtraConfig, kvLoadFailurePolicy, engineId, kvConnectorModulePath);
        }
    }
}
