package dev.kvconnector.layout;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The shape of one TP rank's KV cache: what a producer and a consumer must agree on to exchange KV.
 *
 * <p>For {@link AttentionKind#MHA} every layer has a K and a V tensor of {@code [tokens, kvHeads, headSize]}.
 * For {@link AttentionKind#MLA} every layer has one latent tensor of {@code [tokens, 1, headSize]}, where
 * {@code headSize} is {@code kv_lora_rank + qk_rope_head_dim}.
 *
 * @param name a label, such as the preset name; not part of the fingerprint
 * @param kind MHA (K and V) or MLA (one latent)
 * @param numLayers attention layers on this rank
 * @param kvHeads KV heads on this TP rank (1 for MLA)
 * @param headSize elements per head
 * @param dtype the KV cache dtype
 * @param blockSize tokens per block of the paged cache
 * @param hiddenSize elements of one token's hidden state
 */
public record KVLayout(String name, AttentionKind kind, int numLayers, int kvHeads, int headSize, DType dtype,
                       int blockSize, int hiddenSize) {

    private static final Map<String, KVLayout> PRESETS = new TreeMap<>();
    /**
     * Fingerprints already hashed, by layout: {@link #fingerprint()} runs per request and per manifest, and a
     * SHA-256 with its strings each time was a third of a drop-select's allocation. Layouts are few; the map is
     * emptied if a program makes thousands.
     */
    private static final ConcurrentHashMap<KVLayout, Long> FINGERPRINTS = new ConcurrentHashMap<>();
    private static final int MAX_CACHED_FINGERPRINTS = 1024;

    static {
        preset(new KVLayout("llama3-8b", AttentionKind.MHA, 32, 8, 128, DType.BF16, 16, 4096));
        preset(new KVLayout("llama3-70b", AttentionKind.MHA, 80, 8, 128, DType.BF16, 16, 8192));
        preset(new KVLayout("qwen2.5-0.5b", AttentionKind.MHA, 24, 2, 64, DType.BF16, 16, 896));
        preset(new KVLayout("deepseek-v3-mla", AttentionKind.MLA, 61, 1, 576, DType.BF16, 16, 7168));
    }

    private static void preset(KVLayout layout) {
        PRESETS.put(layout.name(), layout);
    }

    /** Validates every field. */
    public KVLayout {
        if (kind == null || dtype == null) {
            throw invalid("kind and dtype must be set");
        }
        if (numLayers <= 0 || kvHeads <= 0 || headSize <= 0 || blockSize <= 0 || hiddenSize < 0) {
            throw invalid("layers=" + numLayers + " kvHeads=" + kvHeads + " headSize=" + headSize
                    + " blockSize=" + blockSize + " hiddenSize=" + hiddenSize + ": all must be positive (hidden >= 0)");
        }
        if (kind == AttentionKind.MLA && kvHeads != 1) {
            throw invalid("an MLA layout has one latent head, not " + kvHeads);
        }
        name = name == null ? "custom" : name;
    }

    private static KVException invalid(String detail) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "invalid KV layout: " + detail).build();
    }

    /** The preset with this name ({@code llama3-8b}, {@code llama3-70b}, {@code qwen2.5-0.5b}, {@code deepseek-v3-mla}). */
    public static KVLayout preset(String name) {
        KVLayout l = PRESETS.get(name.toLowerCase(Locale.ROOT));
        if (l == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "unknown model preset '" + name + "'")
                    .hint("known presets: " + String.join(", ", PRESETS.keySet())).build();
        }
        return l;
    }

    /** Names of all presets, sorted. */
    public static java.util.Set<String> presetNames() {
        return java.util.Collections.unmodifiableSet(PRESETS.keySet());
    }

    /** This layout split over {@code tpSize} ranks: KV heads are divided (MLA latents are replicated). */
    public KVLayout perRank(int tpSize) {
        if (tpSize <= 0 || (kind == AttentionKind.MHA && kvHeads % tpSize != 0 && tpSize % kvHeads != 0)) {
            throw invalid("cannot split " + kvHeads + " KV heads over TP size " + tpSize);
        }
        int heads = kind == AttentionKind.MLA ? 1 : Math.max(1, kvHeads / tpSize);
        return new KVLayout(name + "/tp" + tpSize, kind, numLayers, heads, headSize, dtype, blockSize, hiddenSize);
    }

    /** This layout with another dtype. */
    public KVLayout withDtype(DType newDtype) {
        return new KVLayout(name, kind, numLayers, kvHeads, headSize, newDtype, blockSize, hiddenSize);
    }

    /** Tensors per layer: 2 (K, V) for MHA, 1 for MLA. */
    public int tensorsPerLayer() {
        return kind == AttentionKind.MHA ? 2 : 1;
    }

    /** Bytes of one token of one tensor (K, V or latent): heads x headSize x width. */
    public long bytesPerTokenPerTensor() {
        return (long) kvHeads * headSize * dtype.byteWidth();
    }

    /** Bytes of one token of one layer, all tensors. */
    public long bytesPerTokenPerLayer() {
        return bytesPerTokenPerTensor() * tensorsPerLayer();
    }

    /** Bytes of one layer's KV for {@code tokens} tokens. */
    public long layerBytes(long tokens) {
        return bytesPerTokenPerLayer() * tokens;
    }

    /** Bytes of the hidden states of {@code tokens} tokens. */
    public long hiddenBytes(long tokens) {
        return (long) hiddenSize * dtype.byteWidth() * tokens;
    }

    /** Bytes of one tensor of one block: blockSize x heads x headSize x width. */
    public long blockBytes() {
        return bytesPerTokenPerTensor() * blockSize;
    }

    /**
     * A stable fingerprint of everything that makes KV bytes compatible: kind, layers, heads, head size, dtype and
     * hidden size (not the name, not the block size, which only shapes the paged view). The first 8 bytes of
     * SHA-256 over {@link #canonicalString()}, as a signed long.
     */
    public long fingerprint() {
        Long cached = FINGERPRINTS.get(this);
        if (cached != null) {
            return cached;
        }
        if (FINGERPRINTS.size() >= MAX_CACHED_FINGERPRINTS) {
            FINGERPRINTS.clear();
        }
        long v = hashFingerprint();
        FINGERPRINTS.put(this, v);
        return v;
    }

    private long hashFingerprint() {
        byte[] d = sha256(canonicalString());
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = (v << 8) | (d[i] & 0xFF);
        }
        return v;
    }

    /** The fingerprint as 16 lower-case hex digits. */
    public String fingerprintHex() {
        return HexFormat.of().toHexDigits(fingerprint());
    }

    /**
     * Whether KV bytes of this layout and of {@code other} are interchangeable: the fields {@link #fingerprint()}
     * covers are equal (compared directly, without building {@link #canonicalString()}).
     */
    public boolean sameKvBytesAs(KVLayout other) {
        return kind == other.kind && numLayers == other.numLayers && kvHeads == other.kvHeads
                && headSize == other.headSize && dtype == other.dtype && hiddenSize == other.hiddenSize;
    }

    /**
     * The canonical text the fingerprint hashes, for example
     * {@code kvlayout/1;kind=MHA;layers=32;kv_heads=8;head_size=128;dtype=BF16;hidden=4096}.
     */
    public String canonicalString() {
        return "kvlayout/1;kind=" + kind + ";layers=" + numLayers + ";kv_heads=" + kvHeads + ";head_size=" + headSize
                + ";dtype=" + dtype.safetensorsName() + ";hidden=" + hiddenSize;
    }

    private static byte[] sha256(String s) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }
}
