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
 * What LMCache's two key schemes share, so that both key the same chunks alike: one object per chunk holding every
 * layer, LMCache's chunks and their hashes, and the refusals. The schemes differ only in how they write a chunk's
 * key from its {@code model@world_size@worker_id@} ({@link LmcacheKeyParts}) and hash.
 *
 * <p>Chunk {@code i} covers tokens {@code [i*C, min((i+1)*C, T))}, {@code C = context.chunkTokens()}, and its hash is
 * chained SHA-256, {@code h_i = sha256(ascii(h_{i-1}) || chunk i's tokens as int64 LE)} in lower-case hex with
 * {@code h_{-1} = ""}. A request identified by engine chunk hashes ({@link RequestTokens#ofChunkHashes}) uses those
 * hashes unchanged, with the engine's chunk size.
 *
 * <p>With {@code saveUnfullChunk} true the trailing partial chunk is keyed too; with false the request is cut to a
 * multiple of the chunk size, so a request shorter than one chunk gets an empty plan. A model id or an engine chunk
 * hash that contains {@code @} is refused, since LMCache splits keys on it. A namespace is refused as well: LMCache
 * keys have no place for one, and these keys exist to be shared across requests. Stateless and thread-safe.
 */
public abstract sealed class LmcacheKeyScheme implements KeyScheme permits LmcacheV0KeyScheme, LmcacheV1KeyScheme {
    private static final HexFormat HEX = HexFormat.of();

    private final String name;
    private final boolean saveUnfullChunk;

    LmcacheKeyScheme(String name, boolean saveUnfullChunk) {
        this.name = name;
        this.saveUnfullChunk = saveUnfullChunk;
    }

    /** Whether the trailing partial chunk is keyed (LMCache's {@code save_unfull_chunk}). */
    public final boolean saveUnfullChunk() {
        return saveUnfullChunk;
    }

    @Override
    public final String name() {
        return name;
    }

    /** LMCache keys hold no request namespace. */
    @Override
    public final boolean bindsNamespace() {
        return false;
    }

    @Override
    public final Granularity granularity() {
        return Granularity.CHUNK;
    }

    /**
     * {@inheritDoc}
     *
     * @throws KVException {@code INVALID_ARGUMENT} for a model id with {@code @}, a namespace, or an engine chunk hash
     *         that is null, empty or holds {@code @}; and whatever the scheme's {@link #chunkKey} refuses
     */
    @Override
    public final KeyPlan plan(KeyContext context, RequestTokens request) {
        Objects.requireNonNull(context, "context");
        Objects.requireNonNull(request, "request");
        String prefix = LmcacheKeyParts.workerPrefix(context.modelId(), context.worldSize(), context.tpRank());
        if (request.namespace() != null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "key scheme " + name + " cannot honour namespace '"
                            + request.namespace() + "': LMCache keys hold no namespace")
                    .operation("plan")
                    .hint("drop the namespace for LMCache interop, or use kvc-v1, whose keys bind the namespace")
                    .build();
        }
        List<ChunkKeys> chunks = request.hasTokens()
                ? fromTokens(context, prefix, request)
                : fromEngineHashes(context, prefix, request);
        return new KeyPlan(name, Granularity.CHUNK, chunks);
    }

    /**
     * The key of the chunk whose hash is {@code chunkHash}.
     *
     * @param workerPrefix the context's {@code model@world_size@worker_id@}, checked
     */
    abstract String chunkKey(KeyContext context, String workerPrefix, String chunkHash);

    private List<ChunkKeys> fromTokens(KeyContext context, String prefix, RequestTokens request) {
        int chunkTokens = context.chunkTokens();
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
            chunks.add(chunk(index, start, stop, previous, chunkKey(context, prefix, previous)));
        }
        return chunks;
    }

    private List<ChunkKeys> fromEngineHashes(KeyContext context, String prefix, RequestTokens request) {
        String[] hashes = request.chunkHashes();
        int chunkTokens = request.chunkHashTokens();
        int total = request.totalTokens();
        List<ChunkKeys> chunks = new ArrayList<>(hashes.length);
        for (int i = 0; i < hashes.length; i++) {
            LmcacheKeyParts.requireEngineHash(i, hashes[i]);
            int start = i * chunkTokens;
            int stop = (int) Math.min((long) start + chunkTokens, total);
            if (stop - start < chunkTokens && !saveUnfullChunk) {
                break;
            }
            chunks.add(chunk(i, start, stop, hashes[i], chunkKey(context, prefix, hashes[i])));
        }
        return chunks;
    }

    private static ChunkKeys chunk(int index, int start, int stop, String hash, String key) {
        return new ChunkKeys(index, start, stop, hash, new String[] {key}, null, null);
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }
}
