package dev.kvconnector.demo;

import java.util.Arrays;

/**
 * The model without any KV cache: every step recomputes the whole sequence with K and V in plain arrays. Slow
 * (quadratic in the sequence) and obviously right, it is what the paged engine must match token for token. It shares
 * only the arithmetic kernels with the engine, so results are bit-identical, and the paged cache, block tables and
 * positions are what the comparison tests.
 */
final class ArrayReferenceModel {
    private final ModelConfig c;
    private final ModelWeights w;
    private final float[] cos;
    private final float[] sin;
    /** K and V of every layer from the last {@link #forward}, {@code [layer][T * kvHeads * headSize]}, after RoPE. */
    float[][] lastKeys;
    float[][] lastValues;

    ArrayReferenceModel(ModelWeights weights) {
        this.c = weights.config();
        this.w = weights;
        float[][] t = Kernels.ropeTables(c);
        this.cos = t[0];
        this.sin = t[1];
    }

    int[] generate(int[] prompt, int maxTokens) {
        int[] seq = Arrays.copyOf(prompt, prompt.length + maxTokens);
        int[] out = new int[maxTokens];
        for (int i = 0; i < maxTokens; i++) {
            int len = prompt.length + i;
            float[] x = forward(Arrays.copyOf(seq, len));
            out[i] = Kernels.argmax(logits(x, len - 1));
            seq[len] = out[i];
        }
        return out;
    }

    /** Hidden states {@code [T][hidden]} after the last layer, before the final norm. */
    float[] forward(int[] tokens) {
        int n = tokens.length;
        int h = c.hiddenSize();
        int hs = c.headSize();
        int qDim = c.heads() * hs;
        int kvDim = c.kvHeads() * hs;
        int inter = c.intermediateSize();
        int group = c.heads() / c.kvHeads();
        float scale = (float) (1.0 / Math.sqrt(hs));
        lastKeys = new float[c.layers()][];
        lastValues = new float[c.layers()][];
        float[] x = new float[n * h];
        for (int t = 0; t < n; t++) {
            System.arraycopy(w.embedding(), tokens[t] * h, x, t * h, h);
        }
        float[] xn = new float[n * h];
        for (int l = 0; l < c.layers(); l++) {
            ModelWeights.Layer lw = w.layer(l);
            float[] q = new float[n * qDim];
            float[] k = new float[n * kvDim];
            float[] v = new float[n * kvDim];
            Kernels.rmsNorm(xn, x, lw.attnNorm(), n, h, c.rmsEps());
            Kernels.matmul(q, xn, lw.wq(), n, h, qDim);
            Kernels.matmul(k, xn, lw.wk(), n, h, kvDim);
            Kernels.matmul(v, xn, lw.wv(), n, h, kvDim);
            for (int t = 0; t < n; t++) {
                Kernels.rope(q, t * qDim, c.heads(), hs, cos, sin, t);
                Kernels.rope(k, t * kvDim, c.kvHeads(), hs, cos, sin, t);
            }
            lastKeys[l] = k;
            lastValues[l] = v;
            float[] att = new float[n * qDim];
            float[] scores = new float[n];
            for (int t = 0; t < n; t++) {
                for (int head = 0; head < c.heads(); head++) {
                    int qo = t * qDim + head * hs;
                    int kvo = (head / group) * hs;
                    for (int j = 0; j <= t; j++) {
                        scores[j] = Kernels.dot(q, qo, k, j * kvDim + kvo, hs) * scale;
                    }
                    Kernels.softmax(scores, t + 1);
                    for (int j = 0; j <= t; j++) {
                        for (int i = 0; i < hs; i++) {
                            att[qo + i] += scores[j] * v[j * kvDim + kvo + i];
                        }
                    }
                }
            }
            float[] proj = new float[n * h];
            Kernels.matmul(proj, att, lw.wo(), n, qDim, h);
            Kernels.add(x, proj, n * h);
            Kernels.rmsNorm(xn, x, lw.mlpNorm(), n, h, c.rmsEps());
            float[] gate = new float[n * inter];
            float[] up = new float[n * inter];
            Kernels.matmul(gate, xn, lw.gate(), n, h, inter);
            Kernels.matmul(up, xn, lw.up(), n, h, inter);
            Kernels.swiglu(gate, up, n * inter);
            Kernels.matmul(proj, gate, lw.down(), n, inter, h);
            Kernels.add(x, proj, n * h);
        }
        return x;
    }

    float[] logits(float[] hidden, int row) {
        int h = c.hiddenSize();
        float[] one = Arrays.copyOfRange(hidden, row * h, row * h + h);
        float[] normed = new float[h];
        Kernels.rmsNorm(normed, one, w.finalNorm(), 1, h, c.rmsEps());
        float[] logits = new float[c.vocabSize()];
        Kernels.matmul(logits, normed, w.embedding(), 1, h, c.vocabSize());
        return logits;
    }
}
