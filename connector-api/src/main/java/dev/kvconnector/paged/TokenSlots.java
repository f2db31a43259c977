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

    /**
     * How many tokens from {@code token} on, and before {@code end}, sit in consecutive slots ({@code slot(token)},
     * {@code slot(token) + 1}, ...): at least 1 when {@code token < end}. A paged cache copies each such run in one
     * piece.
     */
    default int run(int token, int end) {
        long first = slot(token);
        int n = 1;
        while (token + n < end && slot(token + n) == first + n) {
            n++;
        }
        return n;
    }
}
