package dev.kvconnector.demo;

import java.util.SplittableRandom;

/**
 * The demo model's weights, drawn deterministically from {@link ModelConfig#seed()}: every linear layer uniform
 * with standard deviation {@code 1/sqrt(fan-in)}, the embedding with standard deviation 0.02, norm weights near 1.
 * Linear weights are row-major {@code [out][in]} float arrays; the embedding {@code [vocab][hidden]} doubles as the
 * output head (tied embeddings). Immutable once built, so any number of sequences may share one instance.
 */
public final class ModelWeights {
    /**
     * Small against the layers' outputs, as in Llama's own init: with tied embeddings a large embedding dominates the
     * residual stream and the model only ever repeats its last input token.
     */
    private static final double EMBEDDING_STD = 0.02;

    /** One transformer layer's weights. */
    record Layer(float[] attnNorm, float[] wq, float[] wk, float[] wv, float[] wo, float[] mlpNorm, float[] gate,
                 float[] up, float[] down) {
    }

    private final ModelConfig config;
    private final float[] embedding;
    private final Layer[] layers;
    private final float[] finalNorm;

    private ModelWeights(ModelConfig config, float[] embedding, Layer[] layers, float[] finalNorm) {
        this.config = config;
        this.embedding = embedding;
        this.layers = layers;
        this.finalNorm = finalNorm;
    }

    /** Draws the weights of {@code config} from its seed; the same config always gives the same weights. */
    public static ModelWeights random(ModelConfig config) {
        SplittableRandom rnd = new SplittableRandom(config.seed());
        int h = config.hiddenSize();
        int q = config.heads() * config.headSize();
        int kv = config.kvHeads() * config.headSize();
        int inter = config.intermediateSize();
        float[] embedding = uniform(rnd, (long) config.vocabSize() * h, EMBEDDING_STD);
        Layer[] layers = new Layer[config.layers()];
        for (int l = 0; l < layers.length; l++) {
            layers[l] = new Layer(norm(rnd, h), linear(rnd, q, h), linear(rnd, kv, h), linear(rnd, kv, h),
                    linear(rnd, h, q), norm(rnd, h), linear(rnd, inter, h), linear(rnd, inter, h), linear(rnd, h, inter));
        }
        return new ModelWeights(config, embedding, layers, norm(rnd, h));
    }

    private static float[] linear(SplittableRandom rnd, int out, int in) {
        return uniform(rnd, (long) out * in, 1.0 / Math.sqrt(in));
    }

    private static float[] norm(SplittableRandom rnd, int n) {
        float[] w = uniform(rnd, n, 0.1);
        for (int i = 0; i < n; i++) {
            w[i] += 1f;
        }
        return w;
    }

    /** Uniform in {@code [-a, a)} with {@code a = std * sqrt(3)}, so the standard deviation is {@code std}. */
    private static float[] uniform(SplittableRandom rnd, long n, double std) {
        if (n > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("weight tensor of " + n + " elements exceeds a Java array");
        }
        double a = std * Math.sqrt(3.0);
        float[] w = new float[(int) n];
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) ((rnd.nextDouble() * 2 - 1) * a);
        }
        return w;
    }

    /** The config these weights were drawn for. */
    public ModelConfig config() {
        return config;
    }

    float[] embedding() {
        return embedding;
    }

    Layer layer(int l) {
        return layers[l];
    }

    float[] finalNorm() {
        return finalNorm;
    }

    /** Parameters in elements (floats). */
    public long parameterCount() {
        long n = embedding.length + finalNorm.length;
        for (Layer l : layers) {
            n += l.attnNorm.length + l.wq.length + l.wk.length + l.wv.length + l.wo.length + l.mlpNorm.length
                    + l.gate.length + l.up.length + l.down.length;
        }
        return n;
    }
}
