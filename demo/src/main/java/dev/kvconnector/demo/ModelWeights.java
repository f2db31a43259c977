package dev.kvconnector.demo;

import dev.kvconnector.codec.Safetensors;
import dev.kvconnector.codec.SafetensorsObject;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The demo model's weights, drawn deterministically from {@link ModelConfig#seed()}: every linear layer uniform
 * with standard deviation {@code 1/sqrt(fan-in)}, the embedding with standard deviation 0.02, norm weights near 1.
 * Linear weights are row-major {@code [out][in]} float arrays; the embedding {@code [vocab][hidden]} doubles as the
 * output head (tied embeddings). Immutable once built, so any number of sequences may share one instance.
 *
 * <p>{@link #load} reads a safetensors file with Hugging Face Llama tensor names instead, and {@link #save} writes
 * one, so trained weights of a matching config can be served.
 */
public final class ModelWeights {
    /**
     * Small against the layers' outputs, as in Llama's own init: with tied embeddings a large embedding dominates the
     * residual stream and the model only ever repeats its last input token.
     */
    private static final double EMBEDDING_STD = 0.02;
    private static final ValueLayout.OfFloat F32_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

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

    /**
     * Reads weights for {@code config} from a safetensors file with Hugging Face Llama names
     * ({@code model.embed_tokens.weight}, {@code model.layers.N.self_attn.q_proj.weight}, ..., {@code model.norm.weight})
     * in F32, BF16 or F16, converted to FP32. The output head must be tied: a file with {@code lm_head.weight} is
     * refused.
     *
     * @throws KVException {@code IO_ERROR} when the file cannot be read, {@code CORRUPT_OBJECT} when it is not
     *     safetensors or lacks a tensor, {@code SHAPE_MISMATCH} or {@code DTYPE_MISMATCH} when a tensor does not
     *     fit the config, {@code UNSUPPORTED} for an untied output head
     */
    public static ModelWeights load(ModelConfig config, Path file) {
        try (Arena arena = Arena.ofConfined();
             FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            SafetensorsObject o = Safetensors.read(ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena));
            if (o.contains("lm_head.weight")) {
                throw KVException.of(ErrorCode.UNSUPPORTED, file + " has an untied lm_head.weight")
                        .hint("the demo model ties the output head to model.embed_tokens.weight").build();
            }
            Map<String, long[]> shapes = shapes(config);
            Map<String, float[]> t = new LinkedHashMap<>();
            shapes.forEach((name, shape) -> t.put(name, read(o, name, shape, file)));
            Layer[] layers = new Layer[config.layers()];
            for (int l = 0; l < layers.length; l++) {
                String p = "model.layers." + l + ".";
                layers[l] = new Layer(t.get(p + "input_layernorm.weight"), t.get(p + "self_attn.q_proj.weight"),
                        t.get(p + "self_attn.k_proj.weight"), t.get(p + "self_attn.v_proj.weight"),
                        t.get(p + "self_attn.o_proj.weight"), t.get(p + "post_attention_layernorm.weight"),
                        t.get(p + "mlp.gate_proj.weight"), t.get(p + "mlp.up_proj.weight"),
                        t.get(p + "mlp.down_proj.weight"));
            }
            return new ModelWeights(config, t.get("model.embed_tokens.weight"), layers, t.get("model.norm.weight"));
        } catch (IOException e) {
            throw KVException.of(ErrorCode.IO_ERROR, "cannot read weights " + file + ": " + e)
                    .hint("check the path and its permissions").cause(e).build();
        }
    }

    /** Writes these weights as FP32 safetensors with the names {@link #load} reads; returns the bytes written. */
    public long save(Path file) {
        Map<String, float[]> arrays = arrays();
        Map<String, long[]> shapes = shapes(config);
        try (Arena arena = Arena.ofConfined();
             FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                     StandardOpenOption.READ, StandardOpenOption.TRUNCATE_EXISTING)) {
            Map<String, Tensor> tensors = new LinkedHashMap<>();
            for (var e : shapes.entrySet()) {
                float[] a = arrays.get(e.getKey());
                MemorySegment seg = arena.allocate((long) a.length * Float.BYTES, 8);
                MemorySegment.copy(a, 0, seg, F32_LE, 0, a.length);
                tensors.put(e.getKey(), Tensor.host(TensorSpec.of(DType.FP32, e.getValue()), seg));
            }
            Map<String, String> meta = Map.of("format", "pt", "kvc_model_id", config.modelId());
            long size = Safetensors.encodedSize(specs(tensors), meta);
            MemorySegment out = ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
            long written = Safetensors.write(out, tensors, meta);
            out.force();
            return written;
        } catch (IOException e) {
            throw KVException.of(ErrorCode.IO_ERROR, "cannot write weights " + file + ": " + e)
                    .hint("check the directory exists and is writable").cause(e).build();
        }
    }

    private static Map<String, TensorSpec> specs(Map<String, Tensor> tensors) {
        Map<String, TensorSpec> specs = new LinkedHashMap<>();
        tensors.forEach((k, v) -> specs.put(k, v.spec()));
        return specs;
    }

    /** Every weight array under its Hugging Face Llama name. */
    Map<String, float[]> arrays() {
        Map<String, float[]> m = new LinkedHashMap<>();
        m.put("model.embed_tokens.weight", embedding);
        for (int l = 0; l < layers.length; l++) {
            String p = "model.layers." + l + ".";
            Layer w = layers[l];
            m.put(p + "input_layernorm.weight", w.attnNorm);
            m.put(p + "self_attn.q_proj.weight", w.wq);
            m.put(p + "self_attn.k_proj.weight", w.wk);
            m.put(p + "self_attn.v_proj.weight", w.wv);
            m.put(p + "self_attn.o_proj.weight", w.wo);
            m.put(p + "post_attention_layernorm.weight", w.mlpNorm);
            m.put(p + "mlp.gate_proj.weight", w.gate);
            m.put(p + "mlp.up_proj.weight", w.up);
            m.put(p + "mlp.down_proj.weight", w.down);
        }
        m.put("model.norm.weight", finalNorm);
        return m;
    }

    /** Every tensor name with its shape, in Hugging Face Llama's naming. */
    static Map<String, long[]> shapes(ModelConfig c) {
        long h = c.hiddenSize();
        long q = (long) c.heads() * c.headSize();
        long kv = (long) c.kvHeads() * c.headSize();
        long inter = c.intermediateSize();
        Map<String, long[]> m = new LinkedHashMap<>();
        m.put("model.embed_tokens.weight", new long[] {c.vocabSize(), h});
        for (int l = 0; l < c.layers(); l++) {
            String p = "model.layers." + l + ".";
            m.put(p + "input_layernorm.weight", new long[] {h});
            m.put(p + "self_attn.q_proj.weight", new long[] {q, h});
            m.put(p + "self_attn.k_proj.weight", new long[] {kv, h});
            m.put(p + "self_attn.v_proj.weight", new long[] {kv, h});
            m.put(p + "self_attn.o_proj.weight", new long[] {h, q});
            m.put(p + "post_attention_layernorm.weight", new long[] {h});
            m.put(p + "mlp.gate_proj.weight", new long[] {inter, h});
            m.put(p + "mlp.up_proj.weight", new long[] {inter, h});
            m.put(p + "mlp.down_proj.weight", new long[] {h, inter});
        }
        m.put("model.norm.weight", new long[] {h});
        return m;
    }

    private static float[] read(SafetensorsObject o, String name, long[] shape, Path file) {
        if (!o.contains(name)) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, file + " has no tensor " + name)
                    .hint("the file must hold every Hugging Face Llama tensor of the config").build();
        }
        Tensor t = o.tensor(name);
        if (!Arrays.equals(t.spec().shape(), shape)) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, file + ": " + name + " is " + t.spec() + ", the config needs "
                    + Arrays.toString(shape)).hint("load with the ModelConfig the file was made for").build();
        }
        int n = Math.toIntExact(t.spec().elementCount());
        float[] out = new float[n];
        MemorySegment s = t.segment();
        switch (t.spec().dtype()) {
            case FP32 -> MemorySegment.copy(s, F32_LE, 0, out, 0, n);
            case BF16 -> {
                for (int i = 0; i < n; i++) {
                    out[i] = Float.intBitsToFloat((s.getAtIndex(I16_LE, i) & 0xFFFF) << 16);
                }
            }
            case FP16 -> {
                for (int i = 0; i < n; i++) {
                    out[i] = Float.float16ToFloat(s.getAtIndex(I16_LE, i));
                }
            }
            default -> throw KVException.of(ErrorCode.DTYPE_MISMATCH, file + ": " + name + " is " + t.spec().dtype()
                    + "; the demo reads F32, BF16 or F16").build();
        }
        return out;
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
