package dev.kvconnector.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import dev.kvconnector.store.StoreKey;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * kvconnector's own key scheme ({@link KeySchemes#DEFAULT}): one object per chunk per layer, plus a hidden-state
 * object and a manifest per chunk, under keys that bind the model, the layout, the TP rank and size, the namespace
 * and every token of the prefix up to the chunk's end. docs/key-schemes.md specifies it byte for byte, with a
 * Python reference implementation and test vectors.
 *
 * <ul>
 *   <li>Seed: {@code h_{-1} = SHA-256("kvc-v1" 0x00 modelId 0x00 layout.fingerprintHex() 0x00 tpRank 0x00 worldSize
 *       0x00 namespace)}, text in UTF-8, numbers in decimal, a null namespace written as the empty string.</li>
 *   <li>Tokens: chunk {@code i} covers tokens {@code [i*C, min((i+1)*C, T))}, {@code C = context.chunkTokens()}; the
 *       trailing partial chunk is kept. {@code h_i = SHA-256(h_{i-1} || 0x00 || uint32 LE token count || each token
 *       as int32 LE)}.</li>
 *   <li>Engine chunk hashes ({@link RequestTokens#ofChunkHashes}): chunk {@code i} covers the engine's chunk
 *       {@code i}; {@code h_i = SHA-256(h_{i-1} || 0x01 || UTF-8 of engine hash i)}.</li>
 *   <li>Keys, with {@code X} the 64 lower-case hex digits of {@code h_i}: layer {@code L} is {@code kvc1:{X}:L<L>},
 *       hidden states {@code kvc1:{X}:H}, manifest {@code kvc1:{X}:M}. The braces are a Valkey cluster hash tag, so
 *       every object of one chunk lands in one slot.</li>
 * </ul>
 *
 * <p>The 0x00 and 0x01 mode bytes keep a token chunk from ever hashing like an engine hash. Model ids and namespaces
 * containing U+0000 are refused, because the seed uses NUL as its separator.
 */
public final class KvcV1KeyScheme implements KeyScheme {
    /** This scheme's name. */
    public static final String NAME = "kvc-v1";
    /** Every key of this scheme starts with this prefix. */
    public static final String KEY_PREFIX = "kvc1:";

    private static final int HASH_BYTES = 32;
    /** Fixed apart from {@link #NAME} so that renaming the scheme can never change its keys. */
    private static final String SEED_LABEL = "kvc-v1";
    private static final byte SEPARATOR = 0x00;
    private static final byte TOKEN_MODE = 0x00;
    private static final byte ENGINE_HASH_MODE = 0x01;

    /** Creates the scheme; it holds no state. */
    public KvcV1KeyScheme() {
    }

    @Override
    public String name() {
        return NAME;
    }

    /** The {@code X} of a key {@code kvc1:{X}:...} (layer, hidden states or manifest), or null for any other key. */
    @Override
    public String chunkHashOf(String key) {
        int open = KEY_PREFIX.length();
        int close = open + 1 + 64;
        if (key == null || key.length() < close + 2 || !key.startsWith(KEY_PREFIX) || key.charAt(open) != '{'
                || key.charAt(close) != '}' || key.charAt(close + 1) != ':') {
            return null;
        }
        for (int i = open + 1; i < close; i++) {
            char c = key.charAt(i);
            if ((c < '0' || c > '9') && (c < 'a' || c > 'f')) {
                return null;
            }
        }
        return key.substring(open + 1, close);
    }

    /** True: a layer key binds the model, the layout, the rank and every token of the prefix up to its chunk. */
    @Override
    public boolean contentAddressed() {
        return true;
    }

    @Override
    public Granularity granularity() {
        return Granularity.CHUNK_LAYER;
    }

    @Override
    public KeyPlan plan(KeyContext context, RequestTokens request) {
        Objects.requireNonNull(context, "context");
        Objects.requireNonNull(request, "request");
        Hasher hasher = Hasher.CURRENT.get();
        byte[] seed = hasher.seed(context, request.namespace());
        int layers = context.layout().numLayers();
        return request.hasTokens()
                ? planFromTokens(hasher, seed, context.chunkTokens(), layers, request)
                : planFromEngineHashes(hasher, seed, layers, request);
    }

    /**
     * The seed {@code h_{-1}} of a context's chains, for {@code namespace} (null for none): the parent of every
     * request's first chunk. A router that knows it computes the chunk hashes of a prompt's tokens with
     * {@link #planFromRoot} without knowing the layout.
     */
    public static byte[] rootHash(KeyContext context, String namespace) {
        return Hasher.CURRENT.get().seed(context, namespace).clone();
    }

    /**
     * The plan of {@code request}'s tokens in chunks of {@code chunkTokens} from the seed {@code root}
     * ({@link #rootHash}), with {@code layers} layer keys per chunk (0 when only the hashes are wanted): the same
     * hashes as {@link #plan} for the context the seed came from.
     */
    public static KeyPlan planFromRoot(byte[] root, int chunkTokens, int layers, RequestTokens request) {
        if (root == null || root.length != 32 || chunkTokens < 1 || !request.hasTokens()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "planFromRoot needs a 32-byte root, chunkTokens >= 1 ("
                    + chunkTokens + ") and token ids").operation("plan").build();
        }
        return planFromTokens(Hasher.CURRENT.get(), root, chunkTokens, layers, request);
    }

    private static KeyPlan planFromTokens(Hasher hasher, byte[] seed, int chunkTokens, int layers,
                                          RequestTokens request) {
        int total = request.totalTokens();
        int count = chunkCount(total, chunkTokens);
        byte[] hashes = new byte[count * HASH_BYTES];
        hashTokens(hasher, seed, chunkTokens, request, hashes, count);
        ChunkKeys[] chunks = new ChunkKeys[count];
        for (int index = 0; index < count; index++) {
            int start = index * chunkTokens;
            int stop = (int) Math.min((long) start + chunkTokens, total);
            chunks[index] = ChunkKeys.tagged(index, start, stop, KEY_PREFIX, hashes, index * HASH_BYTES, layers);
        }
        return new KeyPlan(NAME, Granularity.CHUNK_LAYER, Arrays.asList(chunks));
    }

    /**
     * {@inheritDoc} A plan of token ids is rewritten for another request of token ids with as many tokens; a plan of
     * engine chunk hashes is never rewritten.
     */
    @Override
    public boolean replan(KeyContext context, RequestTokens request, KeyPlan plan) {
        Objects.requireNonNull(context, "context");
        Objects.requireNonNull(request, "request");
        List<ChunkKeys> chunks = plan.chunks();
        int total = request.totalTokens();
        int count = chunkCount(total, context.chunkTokens());
        if (!request.hasTokens() || !NAME.equals(plan.scheme()) || chunks.isEmpty() || chunks.size() != count
                || plan.totalTokens() != total || chunks.getFirst().endToken() != Math.min(context.chunkTokens(), total)
                || chunks.getFirst().layers() != context.layout().numLayers()) {
            return false;
        }
        byte[] hashes = chunks.getFirst().hashes();
        if (hashes == null || hashes.length != count * HASH_BYTES) {
            return false;
        }
        Hasher hasher = Hasher.CURRENT.get();
        hashTokens(hasher, hasher.seed(context, request.namespace()), context.chunkTokens(), request, hashes, count);
        return true;
    }

    private static int chunkCount(int totalTokens, int chunkTokens) {
        return (int) ((totalTokens + (long) chunkTokens - 1) / chunkTokens);
    }

    /** Chains the hashes of {@code request}'s {@code count} chunks of tokens from {@code seed} into {@code hashes}. */
    private static void hashTokens(Hasher hasher, byte[] seed, int chunkTokens, RequestTokens request, byte[] hashes,
                                   int count) {
        int total = request.totalTokens();
        ByteBuffer body = hasher.body(1 + Integer.BYTES + Integer.BYTES * Math.min(chunkTokens, total));
        MessageDigest sha = hasher.sha;
        sha.reset();
        for (int index = 0; index < count; index++) {
            int start = index * chunkTokens;
            int stop = (int) Math.min((long) start + chunkTokens, total);
            body.clear();
            body.put(TOKEN_MODE).putInt(stop - start);
            for (int t = start; t < stop; t++) {
                body.putInt(request.token(t));
            }
            body.flip();
            chain(sha, seed, hashes, index);
            sha.update(body);
            digest(sha, hashes, index);
        }
    }

    private static KeyPlan planFromEngineHashes(Hasher hasher, byte[] seed, int layers, RequestTokens request) {
        String[] hashes = request.chunkHashes();
        int chunkTokens = request.chunkHashTokens();
        int total = request.totalTokens();
        byte[] chained = new byte[hashes.length * HASH_BYTES];
        ChunkKeys[] chunks = new ChunkKeys[hashes.length];
        MessageDigest sha = hasher.sha;
        sha.reset();
        for (int i = 0; i < hashes.length; i++) {
            if (hashes[i] == null) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "engine chunk hash " + i + " of " + hashes.length
                        + " is null").operation("plan").hint("the engine must supply a hash for every chunk").build();
            }
            chain(sha, seed, chained, i);
            sha.update(ENGINE_HASH_MODE);
            sha.update(hashes[i].getBytes(StandardCharsets.UTF_8));
            digest(sha, chained, i);
            int start = i * chunkTokens;
            int stop = (int) Math.min((long) start + chunkTokens, total);
            chunks[i] = ChunkKeys.tagged(i, start, stop, KEY_PREFIX, chained, i * HASH_BYTES, layers);
        }
        return new KeyPlan(NAME, Granularity.CHUNK_LAYER, Arrays.asList(chunks));
    }

    /** Feeds chunk {@code index}'s parent hash, the seed for chunk 0, into {@code sha}. */
    private static void chain(MessageDigest sha, byte[] seed, byte[] hashes, int index) {
        if (index == 0) {
            sha.update(seed);
        } else {
            sha.update(hashes, (index - 1) * HASH_BYTES, HASH_BYTES);
        }
    }

    private static void digest(MessageDigest sha, byte[] hashes, int index) {
        try {
            sha.digest(hashes, index * HASH_BYTES, HASH_BYTES);
        } catch (DigestException e) {
            throw new IllegalStateException("a SHA-256 digest is 32 bytes", e);
        }
    }

    private static String seedText(KeyContext context, String namespace) {
        char sep = (char) SEPARATOR;
        return SEED_LABEL + sep + context.modelId() + sep + context.layout().fingerprintHex() + sep + context.tpRank() + sep
                + context.worldSize() + sep + namespace;
    }

    private static void requireNoNul(String what, String value) {
        if (value.indexOf('\0') >= 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "kvc-v1 keys cannot bind a " + what
                    + " that contains U+0000").operation("plan")
                    .hint("the seed separates its fields with NUL; remove the NUL character from the " + what).build();
        }
    }

    /**
     * One thread's hashing state, reused plan after plan so that planning allocates only the plan: the digest, the
     * buffer a chunk's tokens are laid out in, and the seed's text up to the namespace for the context seen last.
     */
    private static final class Hasher {
        static final ThreadLocal<Hasher> CURRENT = ThreadLocal.withInitial(Hasher::new);

        final MessageDigest sha = sha256();
        final byte[] seed = new byte[HASH_BYTES];
        private final StoreKey namespaceBytes = new StoreKey();
        private byte[] namespaceCopy = new byte[64];
        private ByteBuffer body = ByteBuffer.allocate(0);
        private KeyContext context;
        private byte[] contextText;

        /**
         * {@link #rootHash}'s value for {@code namespace} (null for none), in this hasher's own array (valid until its
         * next use).
         *
         * @throws KVException {@code INVALID_ARGUMENT} when the model id or the namespace contains U+0000
         */
        byte[] seed(KeyContext context, String namespace) {
            String ns = namespace == null ? "" : namespace;
            requireNoNul("model id", context.modelId());
            requireNoNul("namespace", ns);
            if (context != this.context) {
                String text = seedText(context, "");
                this.contextText = text.getBytes(StandardCharsets.UTF_8);
                this.context = context;
            }
            sha.reset();
            namespaceBytes.set(ns);
            if (namespaceBytes.length() > namespaceCopy.length) {
                namespaceCopy = new byte[namespaceBytes.length()];
            }
            namespaceBytes.copyTo(namespaceCopy, 0);
            sha.update(contextText);
            sha.update(namespaceCopy, 0, namespaceBytes.length());
            digest(sha, seed, 0);
            return seed;
        }

        /** A little-endian buffer of at least {@code bytes} bytes. */
        ByteBuffer body(int bytes) {
            if (body.capacity() < bytes) {
                body = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
            }
            return body;
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }
}
