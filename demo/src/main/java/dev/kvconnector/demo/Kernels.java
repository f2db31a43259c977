package dev.kvconnector.demo;

import java.util.stream.IntStream;

/**
 * The model's arithmetic on float arrays, in FP32 with a fixed summation order, so every caller that uses these
 * kernels gets bit-identical results for the same inputs.
 */
final class Kernels {
    private Kernels() {
    }

    /** {@code a[ao..ao+len) . b[bo..bo+len)} with four partial sums, which lets the JIT keep four FMA chains busy. */
    static float dot(float[] a, int ao, float[] b, int bo, int len) {
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int i = 0;
        for (; i + 3 < len; i += 4) {
            s0 += a[ao + i] * b[bo + i];
            s1 += a[ao + i + 1] * b[bo + i + 1];
            s2 += a[ao + i + 2] * b[bo + i + 2];
            s3 += a[ao + i + 3] * b[bo + i + 3];
        }
        for (; i < len; i++) {
            s0 += a[ao + i] * b[bo + i];
        }
        return (s0 + s1) + (s2 + s3);
    }

    /** Multiply-adds below which a matmul stays on the calling thread: forking costs more than it saves. */
    private static final long PARALLEL_MACS = 1L << 22;
    /** Output rows per parallel task. */
    private static final int ROWS_PER_TASK = 64;

    /**
     * {@code out[t][o] = x[t] . w[o]} for {@code n} rows: x is {@code [n][in]}, w is {@code [outDim][in]}, out is
     * {@code [n][outDim]}. The weight row stays in cache while every token uses it. Large products (a prefill) split
     * the output rows over the common fork-join pool; each element is still one {@link #dot}, so the result does
     * not depend on the split.
     */
    static void matmul(float[] out, float[] x, float[] w, int n, int in, int outDim) {
        if ((long) n * in * outDim < PARALLEL_MACS) {
            rows(out, x, w, n, in, outDim, 0, outDim);
            return;
        }
        int tasks = (outDim + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
        IntStream.range(0, tasks).parallel().forEach(task -> rows(out, x, w, n, in, outDim, task * ROWS_PER_TASK,
                Math.min(outDim, (task + 1) * ROWS_PER_TASK)));
    }

    private static void rows(float[] out, float[] x, float[] w, int n, int in, int outDim, int from, int to) {
        for (int o = from; o < to; o++) {
            int wo = o * in;
            for (int t = 0; t < n; t++) {
                out[t * outDim + o] = dot(w, wo, x, t * in, in);
            }
        }
    }

    /** RMSNorm of {@code n} rows of {@code dim}: {@code out = x / sqrt(mean(x^2) + eps) * weight}. */
    static void rmsNorm(float[] out, float[] x, float[] weight, int n, int dim, float eps) {
        for (int t = 0; t < n; t++) {
            int base = t * dim;
            float ss = dot(x, base, x, base, dim);
            float inv = (float) (1.0 / Math.sqrt(ss / dim + eps));
            for (int i = 0; i < dim; i++) {
                out[base + i] = x[base + i] * inv * weight[i];
            }
        }
    }

    /**
     * Rotates {@code heads} heads of {@code headSize} at {@code offset} by position {@code pos}, rotating element
     * {@code i} with {@code i + headSize/2} as Llama's (Hugging Face) rotate-half convention does.
     */
    static void rope(float[] v, int offset, int heads, int headSize, float[] cos, float[] sin, int pos) {
        int half = headSize / 2;
        int table = pos * half;
        for (int h = 0; h < heads; h++) {
            int base = offset + h * headSize;
            for (int i = 0; i < half; i++) {
                float c = cos[table + i];
                float s = sin[table + i];
                float a = v[base + i];
                float b = v[base + i + half];
                v[base + i] = a * c - b * s;
                v[base + i + half] = a * s + b * c;
            }
        }
    }

    /** The cosine and sine tables {@code [maxContext][headSize/2]}: angle {@code pos * theta^(-2i/headSize)}. */
    static float[][] ropeTables(ModelConfig c) {
        int half = c.headSize() / 2;
        float[] cos = new float[c.maxContext() * half];
        float[] sin = new float[c.maxContext() * half];
        for (int p = 0; p < c.maxContext(); p++) {
            for (int i = 0; i < half; i++) {
                double angle = p * Math.pow(c.ropeTheta(), -2.0 * i / c.headSize());
                cos[p * half + i] = (float) Math.cos(angle);
                sin[p * half + i] = (float) Math.sin(angle);
            }
        }
        return new float[][] {cos, sin};
    }

    /** In-place softmax of {@code x[0..len)}, shifted by the maximum for stability. */
    static void softmax(float[] x, int len) {
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < len; i++) {
            max = Math.max(max, x[i]);
        }
        float sum = 0;
        for (int i = 0; i < len; i++) {
            x[i] = (float) Math.exp(x[i] - max);
            sum += x[i];
        }
        float inv = 1f / sum;
        for (int i = 0; i < len; i++) {
            x[i] *= inv;
        }
    }

    /** SwiGLU's gate in place: {@code gate = silu(gate) * up}. */
    static void swiglu(float[] gate, float[] up, int len) {
        for (int i = 0; i < len; i++) {
            float g = gate[i];
            gate[i] = g / (1f + (float) Math.exp(-g)) * up[i];
        }
    }

    /** {@code x += y} over {@code len} elements. */
    static void add(float[] x, float[] y, int len) {
        for (int i = 0; i < len; i++) {
            x[i] += y[i];
        }
    }

    /** The index of the largest value; the lowest index wins a tie, so greedy decoding is deterministic. */
    static int argmax(float[] x) {
        int best = 0;
        for (int i = 1; i < x.length; i++) {
            if (x[i] > x[best]) {
                best = i;
            }
        }
        return best;
    }
}
