package dev.kvconnector.key;

import dev.kvconnector.store.StoreKey;
import java.util.HexFormat;

/**
 * The keys of one chunk of a request, in one of two forms: named, with every key given as a string; or tagged, with
 * every key derived from the chunk's hash as {@code prefix + "{" + hex(hash) + "}:" + suffix}, the suffix
 * {@code L<layer>}, {@code H} (hidden states) or {@code M} (manifest). A tagged chunk builds no string until one is
 * asked for: the {@code ...(StoreKey)} methods write a key into the caller's buffer without allocating, as a
 * connector does for every object of a request. Immutable and thread-safe.
 */
public final class ChunkKeys {
    private static final HexFormat HEX = HexFormat.of();

    private final int index;
    private final int startToken;
    private final int endToken;
    private final String hashHex;
    private final String[] layerKeys;
    private final String hiddenKey;
    private final String manifestKey;
    /** Tagged form only (else null): the key prefix before the brace, the hashes and where this chunk's 32 start. */
    private final String tagPrefix;
    private final byte[] hashes;
    private final int hashOffset;
    private final int layers;

    /**
     * A named chunk.
     *
     * @param index the chunk's position, from 0
     * @param startToken first token of the chunk (inclusive)
     * @param endToken end of the chunk (exclusive)
     * @param hashHex the chunk's (chained) hash in lower-case hex
     * @param layerKeys for {@link Granularity#CHUNK_LAYER} one key per layer; otherwise one key holding every layer
     * @param hiddenKey the hidden-state object's key, or null when the scheme keeps none
     * @param manifestKey the manifest's key, or null when the scheme writes none (visibility is then the last object)
     */
    public ChunkKeys(int index, int startToken, int endToken, String hashHex, String[] layerKeys, String hiddenKey,
                     String manifestKey) {
        this.index = index;
        this.startToken = startToken;
        this.endToken = endToken;
        this.hashHex = hashHex;
        this.layerKeys = layerKeys.clone();
        this.hiddenKey = hiddenKey;
        this.manifestKey = manifestKey;
        this.tagPrefix = null;
        this.hashes = null;
        this.hashOffset = 0;
        this.layers = layerKeys.length;
    }

    private ChunkKeys(int index, int startToken, int endToken, String tagPrefix, byte[] hashes, int hashOffset,
                      int layers) {
        this.index = index;
        this.startToken = startToken;
        this.endToken = endToken;
        this.hashHex = null;
        this.layerKeys = null;
        this.hiddenKey = null;
        this.manifestKey = null;
        this.tagPrefix = tagPrefix;
        this.hashes = hashes;
        this.hashOffset = hashOffset;
        this.layers = layers;
    }

    /**
     * A tagged chunk whose hash is the 32 bytes of {@code hashes} from {@code hashOffset}, with {@code layers} layer
     * keys, a hidden-state key and a manifest key. The caller never changes those bytes afterwards.
     */
    public static ChunkKeys tagged(int index, int startToken, int endToken, String prefix, byte[] hashes,
                                   int hashOffset, int layers) {
        return new ChunkKeys(index, startToken, endToken, prefix, hashes, hashOffset, layers);
    }

    /** The array this tagged chunk's hash lies in (shared by its plan's chunks), or null for a named chunk. */
    byte[] hashes() {
        return hashes;
    }

    /** The number of layer keys. */
    int layers() {
        return layers;
    }

    /** The chunk's position, from 0. */
    public int index() {
        return index;
    }

    /** First token of the chunk (inclusive). */
    public int startToken() {
        return startToken;
    }

    /** End of the chunk (exclusive). */
    public int endToken() {
        return endToken;
    }

    /** Tokens in this chunk. */
    public int tokens() {
        return endToken - startToken;
    }

    /** The chunk's (chained) hash in lower-case hex. */
    public String hashHex() {
        return tagPrefix == null ? hashHex : HEX.formatHex(hashes, hashOffset, hashOffset + 32);
    }

    /** Layer keys: one per layer for {@link Granularity#CHUNK_LAYER}, otherwise one holding every layer (a copy). */
    public String[] layerKeys() {
        String[] keys = new String[layers];
        for (int l = 0; l < layers; l++) {
            keys[l] = layerKey(l);
        }
        return keys;
    }

    /** Layer key {@code layer} ({@code layerKeys()[layer]}). */
    public String layerKey(int layer) {
        return tagPrefix == null ? layerKeys[layer] : layerKey(layer, new StoreKey()).toString();
    }

    /** Writes layer key {@code layer} into {@code into} and returns it; allocates nothing for a tagged chunk. */
    public StoreKey layerKey(int layer, StoreKey into) {
        if (tagPrefix == null) {
            return into.set(layerKeys[layer]);
        }
        if (layer < 0 || layer >= layers) {
            throw new IndexOutOfBoundsException("layer " + layer + " of a chunk with " + layers + " layers");
        }
        return tag(into).appendByte('L').append(layer);
    }

    /** The hidden-state object's key, or null when the scheme keeps none. */
    public String hiddenKey() {
        return tagPrefix == null ? hiddenKey : hiddenKey(new StoreKey()).toString();
    }

    /** Writes the hidden-state object's key into {@code into} and returns it; the chunk must have one. */
    public StoreKey hiddenKey(StoreKey into) {
        return tagPrefix == null ? into.set(requireKey(hiddenKey, "hidden-state")) : tag(into).appendByte('H');
    }

    /** The manifest's key, or null when the scheme writes none (visibility is then the last object). */
    public String manifestKey() {
        return tagPrefix == null ? manifestKey : manifestKey(new StoreKey()).toString();
    }

    /** Writes the manifest's key into {@code into} and returns it; the chunk must have one. */
    public StoreKey manifestKey(StoreKey into) {
        return tagPrefix == null ? into.set(requireKey(manifestKey, "manifest")) : tag(into).appendByte('M');
    }

    private StoreKey tag(StoreKey into) {
        return into.clear().append(tagPrefix).appendByte('{').appendHex(hashes, hashOffset, 32).appendByte('}')
                .appendByte(':');
    }

    private static String requireKey(String key, String what) {
        if (key == null) {
            throw new IllegalStateException("the key scheme names no " + what + " object");
        }
        return key;
    }

    @Override
    public String toString() {
        return "ChunkKeys[index=" + index + ", tokens=" + startToken + ".." + endToken + ", hash=" + hashHex() + "]";
    }
}
