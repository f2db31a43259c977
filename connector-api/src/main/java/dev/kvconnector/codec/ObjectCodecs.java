package dev.kvconnector.codec;

import dev.kvconnector.codec.vllm.VllmV1Codec;
import dev.kvconnector.codec.vllm.VllmV1ValueLayout;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.vllm.VllmV1KeyScheme;
import dev.kvconnector.layout.KVLayout;
import java.util.ServiceLoader;
import java.util.TreeSet;

/**
 * The codec each key scheme implies: {@code kvc-v1} lays out {@link RawLayerCodec} objects, {@code vllm-v0}
 * {@link VllmV0Codec} ones (with {@code device_id} -1, vLLM's value for the CPU), {@code vllm-v1}
 * {@link VllmV1Codec} ones (FlashAttention's NHD block order), and the schemes of other modules
 * theirs, through {@link ObjectCodecProvider}s on the class path (connector-lmcache: {@code lmcache-v0} and
 * {@code lmcache-v1}).
 */
public final class ObjectCodecs {
    private ObjectCodecs() {
    }

    /**
     * The codec that {@code scheme} implies for {@code layout}.
     *
     * @throws KVException {@code INVALID_ARGUMENT} naming the scheme and the schemes that have a codec
     */
    public static ObjectCodec forScheme(KeyScheme scheme, KVLayout layout) {
        String name = scheme.name();
        if (KeySchemes.DEFAULT.equals(name)) {
            return RawLayerCodec.INSTANCE;
        }
        if ("vllm-v0".equals(name)) {
            return VllmV0Codec.of(-1);
        }
        if (VllmV1KeyScheme.NAME.equals(name)) {
            return VllmV1Codec.of(VllmV1ValueLayout.TokenOrder.NHD);
        }
        TreeSet<String> known = new TreeSet<>();
        known.add(KeySchemes.DEFAULT);
        known.add("vllm-v0");
        known.add(VllmV1KeyScheme.NAME);
        for (ObjectCodecProvider p : ServiceLoader.load(ObjectCodecProvider.class,
                ObjectCodecs.class.getClassLoader())) {
            if (p.scheme().equals(name)) {
                return p.codec(scheme, layout);
            }
            known.add(p.scheme());
        }
        throw KVException.of(ErrorCode.INVALID_ARGUMENT, "key scheme " + name + " implies no codec")
                .operation("connect").hint("give the connector a codec, or use a scheme with one: "
                        + String.join(", ", known)).build();
    }
}
