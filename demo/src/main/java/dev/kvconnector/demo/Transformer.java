package dev.kvconnector.demo;

import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.function.IntConsumer;

/**
 * The Llama-architecture forward pass over a paged KV cache: RMSNorm, RoPE, grouped-query attention, a SwiGLU MLP,
 * residuals, and a tied-embedding output head. Each layer scatters its new K and V into the cache through the
 * sequence's block table, then attention gathers every earlier position's K and V back through the same table, so
 * what the cache holds (computed here or loaded from a store) is exactly what attention sees.
 *
 * <p>Thread-safe: the weights are read-only and every call works in its own scratch arrays; concurrent calls must
 * use disjoint blocks of the cache.
 */
final class Transformer {
    private final ModelConfig c;
    private final ModelWeights w;
    private final float[] cos;
    private final float[] sin;
    private final float attnScale;

    Transformer(ModelWeights weights) {
        this.c = weights.config();
        this.w = weights;
        float[][] tables = Kernels.ropeTables(c);
        this.cos = tables[0];
        this.sin = tables[1];
        this.attnScale = (float) (1.0 / Math.sqrt(c.headSize()));
    }

    /**
     * Runs tokens at positions {@code [start, start + tokens.length)} of a sequence whose positions below
     * {@code start} already have their K and V in {@code cache}.
     *
     * @param kvWritten called with the layer index once that layer's K and V for these tokens are in the cache, or
     *     null
     * @return the hidden states after the last layer, before the final norm: {@code [tokens.length][hiddenSize]}
     */
    float[] forward(int[] tokens, int start, PagedKVCache cache, BlockTable table, IntConsumer kvWritten) {
        int n = tokens.length;
        int h = c.hiddenSize();
        int qDim = c.heads() * c.headSize();
        int kvDim = c.kvHeads() * c.headSize();
        int inter = c.intermediateSize();
        int ctx = start + n;
        float[] x = new float[n * h];
        for (int t = 0; t < n; t++) {
            System.arraycopy(w.embedding(), tokens[t] * h, x, t * h, h);
        }
        float[] xn = new float[n * h];
        float[] q = new float[n * qDim];
        float[] k = new float[n * kvDim];
        float[] v = new float[n * kvDim];
        float[] att = new float[n * qDim];
        float[] proj = new float[n * h];
        float[] gate = new float[n * inter];
        float[] up = new float[n * inter];
        float[] keys = new float[ctx * kvDim];
        float[] values = new float[ctx * kvDim];
        float[] scores = new float[ctx];
        MemorySegment kSeg = MemorySegment.ofArray(k);
        MemorySegment vSeg = MemorySegment.ofArray(v);
        MemorySegment keysSeg = MemorySegment.ofArray(keys);
        MemorySegment valuesSeg = MemorySegment.ofArray(values);
        for (int l = 0; l < c.layers(); l++) {
            ModelWeights.Layer lw = w.layer(l);
            Kernels.rmsNorm(xn, x, lw.attnNorm(), n, h, c.rmsEps());
            Kernels.matmul(q, xn, lw.wq(), n, h, qDim);
            Kernels.matmul(k, xn, lw.wk(), n, h, kvDim);
            Kernels.matmul(v, xn, lw.wv(), n, h, kvDim);
            for (int t = 0; t < n; t++) {
                Kernels.rope(q, t * qDim, c.heads(), c.headSize(), cos, sin, start + t);
                Kernels.rope(k, t * kvDim, c.kvHeads(), c.headSize(), cos, sin, start + t);
            }
            cache.scatter(kSeg, 0, l, 0, table, start, ctx);
            cache.scatter(vSeg, 0, l, 1, table, start, ctx);
            if (kvWritten != null) {
                kvWritten.accept(l);
            }
            cache.gather(l, 0, table, 0, ctx, keysSeg, 0);
            cache.gather(l, 1, table, 0, ctx, valuesSeg, 0);
            attention(att, q, keys, values, scores, n, start);
            Kernels.matmul(proj, att, lw.wo(), n, qDim, h);
            Kernels.add(x, proj, n * h);
            Kernels.rmsNorm(xn, x, lw.mlpNorm(), n, h, c.rmsEps());
            Kernels.matmul(gate, xn, lw.gate(), n, h, inter);
            Kernels.matmul(up, xn, lw.up(), n, h, inter);
            Kernels.swiglu(gate, up, n * inter);
            Kernels.matmul(proj, gate, lw.down(), n, inter, h);
            Kernels.add(x, proj, n * h);
        }
        return x;
    }

    /** Causal grouped-query attention of {@code n} queries at positions from {@code start} over {@code keys/values}. */
    private void attention(float[] out, float[] q, float[] keys, float[] values, float[] scores, int n, int start) {
        int hs = c.headSize();
        int qDim = c.heads() * hs;
        int kvDim = c.kvHeads() * hs;
        int group = c.heads() / c.kvHeads();
        for (int t = 0; t < n; t++) {
            int visible = start + t + 1;
            for (int head = 0; head < c.heads(); head++) {
                int qo = t * qDim + head * hs;
                int kvo = (head / group) * hs;
                for (int j = 0; j < visible; j++) {
                    scores[j] = Kernels.dot(q, qo, keys, j * kvDim + kvo, hs) * attnScale;
                }
                Kernels.softmax(scores, visible);
                Arrays.fill(out, qo, qo + hs, 0f);
                for (int j = 0; j < visible; j++) {
                    float p = scores[j];
                    int vo = j * kvDim + kvo;
                    for (int i = 0; i < hs; i++) {
                        out[qo + i] += p * values[vo + i];
                    }
                }
            }
        }
    }

    /** The logits of row {@code row} of {@code hidden}: final RMSNorm, then the tied embedding as output head. */
    float[] logits(float[] hidden, int row) {
        int h = c.hiddenSize();
        float[] normed = new float[h];
        float[] one = new float[h];
        System.arraycopy(hidden, row * h, one, 0, h);
        Kernels.rmsNorm(normed, one, w.finalNorm(), 1, h, c.rmsEps());
        float[] logits = new float[c.vocabSize()];
        Kernels.matmul(logits, normed, w.embedding(), 1, h, c.vocabSize());
        return logits;
    }
}
