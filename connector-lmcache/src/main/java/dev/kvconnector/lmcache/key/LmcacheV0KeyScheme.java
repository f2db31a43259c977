package dev.kvconnector.lmcache.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.RequestTokens;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * LMCache's 2024 keys, so that kvconnector can share chunks with LMCache 2024 engines and servers: one object per
 * chunk holding every layer, keyed {@code "{fmt}@{model}@{world_size}@{worker_id}@{chunk_hash}"}, where
 * {@code world_size} is {@link KeyContext#worldSize()} and {@code worker_id} is {@link KeyContext#tpRank()}.
 *
 * <p>Chunk hashes are chained SHA-256: {@code h_i = sha256(ascii(h_{i-1}) || chunk i's tokens as int64 LE)}
 * in lower-case hex, with {@code h_{-1} = ""}; chunk {@code i} covers tokens
 * {@code [i*C, min((i+1)*C, T))}, {@code C = context.chunkTokens()}. A request identified by engine chunk hashes
 * ({@link RequestTokens#ofChunkHashes}) uses those hashes directly as {@code chunk_hash}, with the engine's chunk
 * size.
 *
 * <p>With {@code saveUnfullChunk} true the trailing partial chunk is keyed too; with false the request is cut to a
 * multiple of the chunk size, so a request shorter than one chunk gets an empty plan.
 *
 * <p>LMCache parses a key into exactly five {@code @}-separated parts, so a model id or an engine chunk hash that
 * contains {@code @} is refused. A namespace is refused as well: LMCache keys have no place for one, and these keys
 * exist to be shared across requests.
 */
public final class LmcacheV0KeyScheme implements KeyScheme {
    /** This scheme's name. */
    public static final String NAME = "lmcache-v0";
    /** The {@code fmt} of vLLM's layout, {@code [num_layers, 2, T, H, D]} per chunk. */
    public static final String FMT_VLLM = "vllm";
    /** The {@code fmt} of Hugging Face's layout, {@code [num_layers, 2, H, T, D]} per chunk. */
    public static final String FMT_HUGGINGFACE = "huggingface";

    private static final HexFormat HEX = HexFormat.of();

    private final String fmt;
    private final boolean saveUnfullChunk;

    /** The ServiceLoader instance: fmt {@code vllm}, trailing partial chunks kept (LMCache's defaults). */
    public LmcacheV0KeyScheme() {
        this(FMT_VLLM, true);
    }

    /**
     * A scheme with the given format and partial-chunk rule.
     *
     * @param fmt {@code vllm} or {@code huggingface}
     * @param saveUnfullChunk whether the trailing partial chunk is keyed (LMCache's {@code save_unfull_chunk})
     */
    public LmcacheV0KeyScheme(String fmt, boolean saveUnfullChunk) {
        if (!FMT_VLLM.equals(fmt) && !FMT_HUGGINGFACE.equals(fmt)) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "unknown LMCache key format '" + fmt + "'")
                    .hint("LMCache 2024 keys use fmt 'vllm' or 'huggingface'").build();
        }
        this.fmt = fmt;
        this.saveUnfullChunk = saveUnfullChunk;
    }

    /** The key's {@code fmt} part. */
    public String fmt() {
        return fmt;
    }

    /** Whether the trailing partial chunk is keyed. */
    public boolean saveUnfullChunk() {
        return saveUnfullChunk;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Granularity granularity() {
        return Granularity.CHUNK;
    }

    @Override
    public KeyPlan plan(KeyContext context, RequestTokens request) {
        Objects.requireNonNull(context, "context");
        Objects.requireNonNull(request, "request");
        if (context.modelId().indexOf('@') >= 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "model id '" + context.modelId()
                            + "' contains '@', which LMCache keys use as their field separator")
                    .operation("plan")
                    .hint("LMCache parses a key into exactly 5 '@'-separated parts; serve the model under a name without '@'")
                    .build();
        }
        if (request.namespace() != null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "key scheme lmcache-v0 cannot honour namespace '"
                            + request.namespace() + "': LMCache keys hold no namespace")
                    .operation("plan")
                    .hint("drop the namespace for LMCache interop, or use kvc-v1, whose keys bind the namespace")
                    .build();
        }
        String prefix = fmt + "@" + context.modelId() + "@" + context.worldSize() + "@" + context.tpRank() + "@";
        return request.hasTokens()
                ? planFromTokens(prefix, context.chunkTokens(), request)
                : planFromEngineHashes(prefix, request);
    }

    private KeyPlan planFromTokens(String prefix, int chunkTokens, RequestTokens request) {
        int total = request.totalTokens();
        int end = saveUnfullChunk ? total : total - total % chunkTokens;
        List<ChunkKeys> chunks = new ArrayList<>();
        MessageDigest sha = sha256();
        ByteBuffer slice = ByteBuffer.allocate(Long.BYTES * Math.min(chunkTokens, Math.max(end, 1)))
                .order(ByteOrder.LITTLE_ENDIAN);
        String previous = "";
        int stop;
        for (int start = 0, index = 0; start < end; start = stop, index++) {
            stop = (int) Math.min((long) start + chunkTokens, end);
            slice.clear();
            for (int t = start; t < stop; t++) {
                slice.putLong(request.token(t));
            }
            slice.flip();
            sha.update(previous.getBytes(StandardCharsets.US_ASCII));
            sha.update(slice);
            previous = HEX.formatHex(sha.digest());
            chunks.add(chunk(index, start, stop, previous, prefix));
        }
        return new KeyPlan(NAME, Granularity.CHUNK, chunks);
    }

    private KeyPlan planFromEngineHashes(String prefix, RequestTokens request) {
        String[] hashes = request.chunkHashes();
        int chunkTokens = request.chunkHashTokens();
        int total = request.totalTokens();
        List<ChunkKeys> chunks = new ArrayList<>(hashes.length);
        for (int i = 0; i < hashes.length; i++) {
            String hash = hashes[i];
            if (hash == null || hash.isEmpty() || hash.indexOf('@') >= 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "engine chunk hash " + i + " is "
                                + (hash == null ? "null" : hash.isEmpty() ? "empty" : "'" + hash + "', which contains '@'"))
                        .operation("plan")
                        .hint("LMCache keys need a non-empty chunk hash without '@' for every chunk")
                        .build();
            }
            int start = i * chunkTokens;
            int stop = (int) Math.min((long) start + chunkTokens, total);
            if (stop - start < chunkTokens && !saveUnfullChunk) {
                break;
            }
            chunks.add(chunk(i, start, stop, hash, prefix));
        }
        return new KeyPlan(NAME, Granularity.CHUNK, chunks);
    }

    private static ChunkKeys chunk(int index, int start, int stop, String hash, String prefix) {
        return new ChunkKeys(index, start, stop, hash, new String[] {prefix + hash}, null, null);
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }
}
