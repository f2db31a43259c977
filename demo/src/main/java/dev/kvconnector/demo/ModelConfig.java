package dev.kvconnector.demo;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;

/**
 * The shape of the demo's Llama-architecture model and the seed of its weights.
 *
 * @param layers transformer layers
 * @param hiddenSize elements of one token's hidden state
 * @param heads query heads
 * @param kvHeads key/value heads (grouped-query attention: {@code heads} must be a multiple)
 * @param headSize elements per head
 * @param intermediateSize elements of the SwiGLU MLP's inner projection
 * @param vocabSize token ids, at least 256 for the byte tokenizer
 * @param maxContext the most tokens a sequence may hold (prompt plus generated)
 * @param ropeTheta the RoPE base
 * @param rmsEps the RMSNorm epsilon
 * @param seed the seed every weight derives from; two engines with the same config compute the same KV
 */
public record ModelConfig(int layers, int hiddenSize, int heads, int kvHeads, int headSize, int intermediateSize,
                          int vocabSize, int maxContext, float ropeTheta, float rmsEps, long seed) {
    /** Tokens per block of the paged KV cache. */
    public static final int BLOCK_SIZE = 16;

    /** Validates every field. */
    public ModelConfig {
        if (layers < 1 || hiddenSize < 1 || heads < 1 || kvHeads < 1 || headSize < 2 || headSize % 2 != 0
                || intermediateSize < 1 || maxContext < 1 || !(ropeTheta > 0) || !(rmsEps > 0)) {
            throw invalid("layers=" + layers + " hiddenSize=" + hiddenSize + " heads=" + heads + " kvHeads=" + kvHeads
                    + " headSize=" + headSize + " intermediateSize=" + intermediateSize + " maxContext=" + maxContext
                    + " ropeTheta=" + ropeTheta + " rmsEps=" + rmsEps
                    + ": all must be positive and headSize even (RoPE rotates pairs)");
        }
        if (heads % kvHeads != 0) {
            throw invalid(heads + " query heads cannot be grouped over " + kvHeads + " KV heads");
        }
        if (vocabSize < 256) {
            throw invalid("vocabSize " + vocabSize + " is below the byte tokenizer's 256 ids");
        }
    }

    private static KVException invalid(String detail) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "model config: " + detail).build();
    }

    /** The demo's default: 8 layers, hidden 512, 8 heads over 2 KV heads of 64, vocab 256, 2048 tokens. */
    public static ModelConfig small(long seed) {
        return new ModelConfig(8, 512, 8, 2, 64, 1408, 256, 2048, 10_000f, 1e-5f, seed);
    }

    /** A model small enough for unit tests on two cores: 2 layers, hidden 64, 4 heads over 2 KV heads of 16. */
    public static ModelConfig tiny(long seed) {
        return new ModelConfig(2, 64, 4, 2, 16, 128, 256, 512, 10_000f, 1e-5f, seed);
    }

    /** This config with another seed. */
    public ModelConfig withSeed(long newSeed) {
        return new ModelConfig(layers, hiddenSize, heads, kvHeads, headSize, intermediateSize, vocabSize, maxContext,
                ropeTheta, rmsEps, newSeed);
    }

    /**
     * The model's id, bound into every store key: it names the shape and the seed, so engines with different
     * weights never read each other's KV.
     */
    public String modelId() {
        return "kvc-demo-llama-l" + layers + "-h" + hiddenSize + "-a" + heads + "-kv" + kvHeads + "-d" + headSize
                + "-i" + intermediateSize + "-v" + vocabSize + "-s" + Long.toHexString(seed);
    }

    /** The paged KV cache's layout: MHA, FP32 (so transfers are exact), blocks of {@value #BLOCK_SIZE} tokens. */
    public KVLayout kvLayout() {
        return new KVLayout(modelId(), AttentionKind.MHA, layers, kvHeads, headSize, DType.FP32, BLOCK_SIZE,
                hiddenSize);
    }
}
