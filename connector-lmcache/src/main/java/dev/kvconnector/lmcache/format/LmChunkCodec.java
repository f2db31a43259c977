package dev.kvconnector.lmcache.format;

import dev.kvconnector.codec.ChunkObjectPlan;
import dev.kvconnector.codec.Completion;
import dev.kvconnector.codec.KvOnlyPlan;
import dev.kvconnector.codec.ObjectCodec;
import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.codec.TensorPlacement;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.StoreUri;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * LMCache chunk objects as an {@link ObjectCodec}: one object per chunk holding every layer
 * ({@link Completion#PER_CHUNK}), laid out as {@link LmChunkFormat} says. The v1 formats ({@code KV_2LTD},
 * {@code KV_MLA}) start with the 28-byte single-group {@link LmRemoteMetadata} (length, fmt, dtype, shape), as
 * LMCache's remote backends store it; the 2024 formats ({@code vllm}, {@code huggingface}) are the raw KV bytes.
 * Over {@code lmcache+lm://} the store moves the metadata into the protocol v1 request header, so the object here
 * is the same for every store. {@code huggingface} places heads before tokens: its {@link TensorPlacement}s have a
 * head stride of {@code T * D * elementBytes}. No hidden states, no checksum (LMCache's objects have none).
 *
 * <p>Validation: an object of another size, or whose metadata names another format, dtype or shape, is a layout
 * mismatch; metadata that cannot be read (a dtype number outside 0..8, a negative dimension) is corrupt. LMCache's
 * two float16 numbers (1 and 2) are the same dtype.
 */
public final class LmChunkCodec implements ObjectCodec {
    /** Status: the object's size is not this layout's chunk size. */
    public static final int WRONG_SIZE = -1;
    /** Status: the RemoteMetadata cannot be read. */
    public static final int UNREADABLE_METADATA = -2;
    /** Status: the RemoteMetadata names another format, dtype or shape. */
    public static final int OTHER_LAYOUT = -3;

    private final LmChunkFormat format;

    private LmChunkCodec(LmChunkFormat format) {
        this.format = format;
    }

    /** The codec of {@code format}. */
    public static LmChunkCodec of(LmChunkFormat format) {
        return new LmChunkCodec(Objects.requireNonNull(format, "format"));
    }

    /** LMCache's default format for a layout: {@code V1_KV_MLA} for MLA, {@code V1_KV_2LTD} otherwise. */
    public static LmChunkFormat defaultFormat(KVLayout layout) {
        return layout.kind() == AttentionKind.MLA ? LmChunkFormat.V1_KV_MLA : LmChunkFormat.V1_KV_2LTD;
    }

    /** The chunk format. */
    public LmChunkFormat format() {
        return format;
    }

    /** Bytes of the RemoteMetadata in front of the KV: 28 for the v1 formats, 0 for the 2024 ones. */
    public int metadataBytes() {
        return format.memoryFormat() > 0 ? LmRemoteMetadata.SINGLE_GROUP_BYTES : 0;
    }

    @Override
    public String name() {
        return "lmcache-" + format.name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
    }

    @Override
    public Granularity granularity() {
        return Granularity.CHUNK;
    }

    @Override
    public Completion completion() {
        return Completion.PER_CHUNK;
    }

    /** LMCache chunk objects hold KV alone. */
    @Override
    public boolean holdsHiddenStates() {
        return false;
    }

    /**
     * {@inheritDoc}
     *
     * @throws KVException {@code INVALID_ARGUMENT} when the format does not fit the layout (MLA needs
     *                     {@code V1_KV_MLA} and nothing else does); {@code DTYPE_MISMATCH} for a dtype LMCache has no
     *                     number for; {@code SHAPE_MISMATCH} for a chunk larger than LMCache's int32 fields
     */
    @Override
    public ObjectPlan plan(KeyPlan keys, KVLayout layout, boolean checksums) {
        requireFits(layout);
        return new Plan(keys, layout);
    }

    /**
     * Checks that this format can hold KV of {@code layout}.
     *
     * @throws KVException {@code INVALID_ARGUMENT} when the format does not fit the layout (MLA needs
     *                     {@code V1_KV_MLA} and nothing else does); {@code DTYPE_MISMATCH} for a dtype that LMCache's
     *                     metadata has no number for
     */
    public void requireFits(KVLayout layout) {
        if ((format == LmChunkFormat.V1_KV_MLA) != (layout.kind() == AttentionKind.MLA)) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "format " + format + " does not fit a " + layout.kind()
                    + " layout").hint("use V1_KV_MLA for MLA layouts, and V1_KV_2LTD, V0_VLLM or V0_HUGGINGFACE "
                    + "for MHA").build();
        }
        if (format.memoryFormat() > 0) {
            LmRemoteMetadata.dtypeCode(layout.dtype());
        }
    }

    /**
     * {@inheritDoc} The v1 formats' RemoteMetadata goes in the request header over an LMCache server, so a plain
     * {@code lm://} store, which would keep it inside the object, is refused for them ({@code lmcache+lm://} is the
     * store); the 2024 formats have no metadata, so the {@code lmcache+} layout stores, which hold v1 chunk objects,
     * are refused for them.
     */
    @Override
    public void requireStore(String storeUri) {
        String scheme = StoreUri.parse(storeUri).scheme();
        if (metadataBytes() > 0 && "lm".equals(scheme)) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "format " + format + " carries RemoteMetadata, which a "
                    + "plain lm:// store would keep inside the object, where LMCache clients do not expect it")
                    .store(storeUri).operation("connect").hint("open the server as lmcache+lm://host:port, which "
                            + "sends the metadata in the protocol header as LMCache does").build();
        }
        if (metadataBytes() == 0 && scheme.startsWith("lmcache+")) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "format " + format + " writes 2024 chunks without "
                    + "RemoteMetadata, and " + storeUri + " holds LMCache v1 chunk objects")
                    .store(storeUri).operation("connect").hint("use V1_KV_2LTD (or V1_KV_MLA) over lmcache+ stores, or "
                            + "the plain store URI for 2024 chunks").build();
        }
    }

    @Override
    public String toString() {
        return name();
    }

    private final class Plan extends ChunkObjectPlan implements KvOnlyPlan {
        private final LmChunkGeometry[] geometry;
        private final LmRemoteMetadata[] metadata;
        private final int meta;

        Plan(KeyPlan keys, KVLayout layout) {
            super(keys);
            this.meta = metadataBytes();
            int dtypeCode = format.memoryFormat() > 0 ? LmRemoteMetadata.dtypeCode(layout.dtype()) : 0;
            this.geometry = new LmChunkGeometry[chunks()];
            this.metadata = new LmRemoteMetadata[chunks()];
            for (int c = 0; c < chunks(); c++) {
                LmChunkGeometry g = new LmChunkGeometry(layout.numLayers(), chunk(c).tokens(), layout.kvHeads(),
                        layout.headSize(), layout.dtype().byteWidth());
                geometry[c] = g;
                if (meta > 0) {
                    metadata[c] = expectedMetadata(g, dtypeCode);
                }
            }
        }

        private LmRemoteMetadata expectedMetadata(LmChunkGeometry g, int dtypeCode) {
            long[] shape = format.shape(g);
            long bytes = format.chunkBytes(g);
            for (long d : shape) {
                if (d > Integer.MAX_VALUE) {
                    throw KVException.of(ErrorCode.SHAPE_MISMATCH, "chunk dimension " + d + " does not fit "
                            + "LMCache's int32 metadata").build();
                }
            }
            if (bytes > Integer.MAX_VALUE) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, "a chunk of " + bytes + " bytes does not fit "
                        + "LMCache's int32 length; use fewer chunk tokens").build();
            }
            return LmRemoteMetadata.of((int) bytes, format.memoryFormat(), dtypeCode, (int) shape[0],
                    (int) shape[1], (int) shape[2], (int) shape[3]);
        }

        @Override
        public String objectsName() {
            return "LMCache chunk objects (" + format + ")";
        }

        @Override
        public long layerObjectBytes(int chunk, int layer) {
            return meta + format.chunkBytes(geometry[chunk]);
        }

        @Override
        public TensorPlacement placement(int chunk, int layer, int tensor) {
            LmChunkGeometry g = geometry[chunk];
            long headBytes = (long) g.headSize() * g.elementBytes();
            if (format.tokenMajor()) {
                return TensorPlacement.contiguous(meta + format.blockOffset(g, layer, tensor), g.tokens(), g.heads(),
                        headBytes);
            }
            long base = meta + (2L * layer + tensor) * g.tensorBytes();
            return new TensorPlacement(base, g.tokens(), g.heads(), headBytes, headBytes, g.tokens() * headBytes);
        }

        @Override
        public void seal(int chunk, int layer, MemorySegment object) {
            if (meta > 0) {
                metadata[chunk].encode(object, 0);
            }
        }

        @Override
        public void sealDetached(int chunk, int layer, MemorySegment header) {
            seal(chunk, layer, header);
        }

        @Override
        public long headerBytes() {
            return meta;
        }

        @Override
        public int validate(int chunk, int layer, MemorySegment object, long length) {
            if (length != layerObjectBytes(chunk, layer)) {
                return WRONG_SIZE;
            }
            return validateHeader(chunk, layer, object, length);
        }

        @Override
        public int validateHeader(int chunk, int layer, MemorySegment header, long length) {
            if (length != layerObjectBytes(chunk, layer)) {
                return WRONG_SIZE;
            }
            if (meta == 0) {
                return OK;
            }
            LmRemoteMetadata got;
            try {
                got = LmRemoteMetadata.decode(header, 0, 1);
                LmRemoteMetadata.dtypeOfCode(got.groups().getFirst().dtype());
            } catch (KVException e) {
                return UNREADABLE_METADATA;
            }
            return sameLayout(metadata[chunk], got) ? OK : OTHER_LAYOUT;
        }

        /** Equal, except that dtype numbers 1 and 2 both mean float16 in LMCache. */
        private static boolean sameLayout(LmRemoteMetadata a, LmRemoteMetadata b) {
            if (a.length() != b.length() || a.fmt() != b.fmt()) {
                return false;
            }
            LmRemoteMetadata.Group x = a.groups().getFirst();
            LmRemoteMetadata.Group y = b.groups().getFirst();
            return Objects.equals(LmRemoteMetadata.dtypeOfCode(x.dtype()), LmRemoteMetadata.dtypeOfCode(y.dtype()))
                    && x.shape0() == y.shape0() && x.shape1() == y.shape1() && x.shape2() == y.shape2()
                    && x.shape3() == y.shape3();
        }

        @Override
        public String describe(int status) {
            return switch (status) {
                case WRONG_SIZE -> "the object is not the size of a " + format + " chunk of this layout";
                case UNREADABLE_METADATA -> "its RemoteMetadata cannot be read (a dtype number outside 0..8 or a "
                        + "negative dimension)";
                case OTHER_LAYOUT -> "its RemoteMetadata names another format, dtype or shape than this layout's";
                default -> "status " + status;
            } + ". Another writer used this model name with a different layout (heads, layers, head size, TP split "
                    + "or format)";
        }

        @Override
        public boolean isLayoutMismatch(int status) {
            return status != UNREADABLE_METADATA;
        }
    }
}
