package dev.kvconnector.lmcache.format;

import dev.kvconnector.codec.ObjectCodec;
import dev.kvconnector.codec.ObjectCodecProvider;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.lmcache.key.LmcacheV0KeyScheme;
import dev.kvconnector.lmcache.key.LmcacheV1KeyScheme;

/**
 * The codecs the LMCache key schemes imply, registered for {@link java.util.ServiceLoader}, so that a connector built
 * with {@code keyScheme("lmcache-v1")} or {@code keyScheme("lmcache-v0")} alone lays out LMCache chunk objects.
 */
public final class LmChunkCodecProviders {
    private LmChunkCodecProviders() {
    }

    /** {@code lmcache-v1}: {@code V1_KV_MLA} for MLA layouts, {@code V1_KV_2LTD} otherwise. */
    public static final class V1 implements ObjectCodecProvider {
        /** For {@link java.util.ServiceLoader}. */
        public V1() {
        }

        @Override
        public String scheme() {
            return LmcacheV1KeyScheme.NAME;
        }

        @Override
        public ObjectCodec codec(KeyScheme scheme, KVLayout layout) {
            return LmChunkCodec.of(LmChunkCodec.defaultFormat(layout));
        }
    }

    /** {@code lmcache-v0}: the 2024 format its {@code fmt} names ({@code vllm} unless the scheme says otherwise). */
    public static final class V0 implements ObjectCodecProvider {
        /** For {@link java.util.ServiceLoader}. */
        public V0() {
        }

        @Override
        public String scheme() {
            return LmcacheV0KeyScheme.NAME;
        }

        @Override
        public ObjectCodec codec(KeyScheme scheme, KVLayout layout) {
            boolean hf = scheme instanceof LmcacheV0KeyScheme s && LmcacheV0KeyScheme.FMT_HUGGINGFACE.equals(s.fmt());
            return LmChunkCodec.of(hf ? LmChunkFormat.V0_HUGGINGFACE : LmChunkFormat.V0_VLLM);
        }
    }
}
