package dev.kvconnector.paged;

/**
 * Where each token of a request sits in a paged KV cache: token {@code t} is at slot {@code slot(t)}, meaning
 * block {@code slot / blockSize}, row {@code slot % blockSize}. A {@link BlockTable} or a {@link SlotMapping}.
 */
public sealed interface TokenSlots permits BlockTable, SlotMapping {
    /** The slot of token {@code t}. */
    long slot(int token);

    /** The number of tokens these slots describe. */
    int tokens();
}
