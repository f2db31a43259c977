package dev.kvconnector.key;

/** How a key scheme cuts a request into stored objects. */
public enum Granularity {
    /** One object per chunk per layer, plus a hidden-state object and a manifest per chunk (kvconnector's default). */
    CHUNK_LAYER,
    /** One object per chunk holding every layer (LMCache). {@link ChunkKeys#layerKeys()} has one key. */
    CHUNK,
    /** One object for the whole request holding every layer, plus one hidden-state object (vLLM V0). */
    WHOLE_REQUEST
}
