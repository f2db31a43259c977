package dev.kvconnector.connector;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.TokenSlots;

/** The checks every paged source and sink makes, in one place, so that their errors read the same. */
public final class LayerChecks {
    private LayerChecks() {
    }

    /**
     * Checks that a paged cache has the connector's layout and that the request's slots cover its tokens.
     *
     * @param what the cache's kind for the message ({@code paged cache}, {@code device paged cache})
     * @throws KVException {@code SHAPE_MISMATCH} naming both layouts, or the slots' and the request's token counts
     */
    public static void paged(String what, KVLayout have, TokenSlots slots, KVLayout layout, int tokens, String op,
                             String endpoint) {
        if (!have.sameKvBytesAs(layout)) {
            throw error(ErrorCode.SHAPE_MISMATCH, what + " layout " + have.canonicalString() + " differs from the "
                    + "connector's " + layout.canonicalString(), op, endpoint);
        }
        if (slots.tokens() < tokens) {
            throw error(ErrorCode.SHAPE_MISMATCH, "slots cover " + slots.tokens() + " tokens, the request has "
                    + tokens, op, endpoint);
        }
    }

    static KVException error(ErrorCode code, String detail, String op, String endpoint) {
        var b = KVException.of(code, detail).operation(op);
        if (endpoint != null) {
            b.store(endpoint);
        }
        return b.build();
    }
}
