package dev.kvconnector.key.vllm;

/**
 * Writes the few Python values that vLLM's block hash serialises, {@code (parent, tuple(tokens), extra_keys)} and
 * the {@code NONE_HASH} seed string, in one serialisation (pickle or canonical CBOR), so that the hash input is
 * built once for both.
 *
 * <p>Values are written depth-first, as the serialiser visits them: a tuple is {@link #beginTuple(int)}, its items,
 * then {@link #endTuple(int)} with the same size. A writer is used for one value and then {@link #finish()}ed.
 */
interface PythonValueWriter {
    /** A Python {@code bytes} object. */
    void bytes(byte[] value);

    /** A Python {@code str}, encoded as UTF-8. */
    void str(String value);

    /** Python's {@code None}. */
    void none();

    /** A Python {@code int}. */
    void integer(long value);

    /** Opens a tuple of {@code size} items. */
    void beginTuple(int size);

    /** Closes the tuple opened last; {@code size} is the size given to {@link #beginTuple(int)}. */
    void endTuple(int size);

    /** The serialised value. The writer cannot be used afterwards. */
    byte[] finish();
}
