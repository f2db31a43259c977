package dev.kvconnector.paged;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * A request's block table, as vLLM keeps it: token {@code t} lives in block {@code blocks[t / blockSize]} at row
 * {@code t % blockSize}.
 */
public final class BlockTable implements TokenSlots {
    private final int[] blocks;
    private final int blockSize;
    private final int tokens;

    /**
     * @param blocks block ids in token order (copied)
     * @param blockSize tokens per block
     * @param tokens tokens used, at most {@code blocks.length * blockSize}
     */
    public BlockTable(int[] blocks, int blockSize, int tokens) {
        if (blockSize <= 0 || tokens < 0 || (long) blocks.length * blockSize < tokens) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, blocks.length + " blocks of " + blockSize
                    + " tokens cannot hold " + tokens + " tokens").build();
        }
        this.blocks = blocks.clone();
        this.blockSize = blockSize;
        this.tokens = tokens;
    }

    @Override
    public long slot(int token) {
        return (long) blocks[token / blockSize] * blockSize + token % blockSize;
    }

    @Override
    public int tokens() {
        return tokens;
    }

    /** {@inheritDoc} Block by block: a block's rows are consecutive, so only block ids are compared. */
    @Override
    public int run(int token, int end) {
        int b = token / blockSize;
        long next = (long) (b + 1) * blockSize;
        while (next < end && blocks[b + 1] == blocks[b] + 1) {
            b++;
            next += blockSize;
        }
        return (int) (Math.min(next, end) - token);
    }

    /** Tokens per block. */
    public int blockSize() {
        return blockSize;
    }
}
