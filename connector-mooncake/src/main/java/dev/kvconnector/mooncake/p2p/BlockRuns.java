package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.paged.TokenSlots;

/**
 * A request's tokens in D's blocks as runs of consecutive blocks, in token order: run {@code r} holds
 * {@code tokens(r)} tokens from the request's token {@code firstToken(r)} on, in D's slots from
 * {@code firstSlot(r)} on (slot = block id x block size + row). P writes one WRITE per run and tensor; D sums a
 * landed layer one run at a time.
 */
final class BlockRuns {
    private final int[] firstToken;
    private final long[] firstSlot;
    private final int[] tokens;

    /**
     * @param blockIds D's block of each {@code blockSize} tokens of the request
     * @param requestTokens the request's tokens; the last block holds the rest
     */
    BlockRuns(int[] blockIds, int blockSize, int requestTokens) {
        int runs = 0;
        for (int b = 0; b < blockIds.length; b++) {
            runs += b == 0 || blockIds[b] != blockIds[b - 1] + 1 ? 1 : 0;
        }
        firstToken = new int[runs];
        firstSlot = new long[runs];
        tokens = new int[runs];
        int r = 0;
        for (int b = 0; b < blockIds.length; r++) {
            int run = 1;
            while (b + run < blockIds.length && blockIds[b + run] == blockIds[b] + run) {
                run++;
            }
            firstToken[r] = b * blockSize;
            firstSlot[r] = (long) blockIds[b] * blockSize;
            tokens[r] = Math.min((b + run) * blockSize, requestTokens) - b * blockSize;
            b += run;
        }
    }

    /**
     * D's block of each {@code blockSize} tokens of a request of {@code tokens} tokens at {@code slots}.
     *
     * @throws KVException {@code UNSUPPORTED} naming the token, for slots that do not fill whole blocks in order
     */
    static int[] blockIds(TokenSlots slots, int tokens, int blockSize, String transferId, String endpoint) {
        int[] ids = new int[(tokens + blockSize - 1) / blockSize];
        for (int b = 0; b < ids.length; b++) {
            long first = slots.slot(b * blockSize);
            if (first % blockSize != 0) {
                throw unaligned(b * blockSize, first, blockSize, transferId, endpoint);
            }
            ids[b] = (int) (first / blockSize);
            for (int t = b * blockSize + 1; t < Math.min(tokens, (b + 1) * blockSize); t++) {
                if (slots.slot(t) != first + t - (long) b * blockSize) {
                    throw unaligned(t, slots.slot(t), blockSize, transferId, endpoint);
                }
            }
        }
        return ids;
    }

    private static KVException unaligned(int token, long slot, int blockSize, String transferId, String endpoint) {
        return KVException.of(ErrorCode.UNSUPPORTED, "transfer " + transferId + ": token " + token + " maps to slot "
                        + slot + ", not the next row of a whole block of " + blockSize + " tokens")
                .store(endpoint).operation("beginDropSelect").key(transferId)
                .hint("a peer-to-peer destination is whole blocks: use a BlockTable").build();
    }

    /** How many runs. */
    int count() {
        return tokens.length;
    }

    /** The request's first token in run {@code r}. */
    int firstToken(int r) {
        return firstToken[r];
    }

    /** D's slot of the first token of run {@code r}. */
    long firstSlot(int r) {
        return firstSlot[r];
    }

    /** Tokens in run {@code r}. */
    int tokens(int r) {
        return tokens[r];
    }
}
