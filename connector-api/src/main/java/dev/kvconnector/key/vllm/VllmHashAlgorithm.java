package dev.kvconnector.key.vllm;

import com.dynatrace.hash4j.hashing.HashValue128;
import com.dynatrace.hash4j.hashing.Hashing;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.stream.Collectors;

/**
 * vLLM's {@code prefix_caching_hash_algo} choices ({@code vllm/config/cache.py}, {@code vllm/utils/hashing.py}):
 * a serialisation of the hashed value, then a digest over its bytes.
 *
 * <p>XXH3-128 comes from hash4j ({@code com.dynatrace.hash4j}); its 128-bit value is written high 64 bits first,
 * big-endian, which is Python's {@code xxhash.xxh3_128().digest()}.
 */
public enum VllmHashAlgorithm {
    /** SHA-256 over pickle protocol 5: vLLM's default. */
    SHA256("sha256", Serialisation.PICKLE, 32),
    /** SHA-256 over canonical CBOR. */
    SHA256_CBOR("sha256_cbor", Serialisation.CBOR, 32),
    /** XXH3-128 over pickle protocol 5. */
    XXHASH("xxhash", Serialisation.PICKLE, 16),
    /** XXH3-128 over canonical CBOR. */
    XXHASH_CBOR("xxhash_cbor", Serialisation.CBOR, 16);

    private enum Serialisation { PICKLE, CBOR }

    private final String vllmName;
    private final Serialisation serialisation;
    private final int digestBytes;

    VllmHashAlgorithm(String vllmName, Serialisation serialisation, int digestBytes) {
        this.vllmName = vllmName;
        this.serialisation = serialisation;
        this.digestBytes = digestBytes;
    }

    /**
     * The algorithm vLLM calls {@code name} ({@code sha256}, {@code sha256_cbor}, {@code xxhash},
     * {@code xxhash_cbor}); any other name is an {@code INVALID_ARGUMENT} error naming the field {@code field}.
     */
    public static VllmHashAlgorithm byName(String name, String field) {
        for (VllmHashAlgorithm a : values()) {
            if (a.vllmName.equals(name)) {
                return a;
            }
        }
        throw KVException.of(ErrorCode.INVALID_ARGUMENT, field + ": unknown vLLM hash algorithm '" + name + "'")
                .hint("vLLM's prefix_caching_hash_algo is one of "
                        + Arrays.stream(values()).map(VllmHashAlgorithm::vllmName).collect(Collectors.joining(", ")))
                .build();
    }

    /** The name vLLM's configuration uses. */
    public String vllmName() {
        return vllmName;
    }

    /** Bytes of one digest: 32 for the SHA-256 algorithms, 16 for the XXH3-128 ones. */
    public int digestBytes() {
        return digestBytes;
    }

    /** Whether vLLM draws {@code NONE_HASH} at random when {@code PYTHONHASHSEED} is unset (the xxhash ones). */
    public boolean randomNoneHashWithoutSeed() {
        return this == XXHASH || this == XXHASH_CBOR;
    }

    /** A writer for one value in this algorithm's serialisation. */
    PythonValueWriter newWriter() {
        return serialisation == Serialisation.PICKLE ? new Pickle5Writer() : new CanonicalCborWriter();
    }

    /** The digest of already serialised bytes. */
    byte[] digest(byte[] serialised) {
        if (digestBytes == 16) {
            HashValue128 v = Hashing.xxh3_128().hashBytesTo128Bits(serialised);
            return ByteBuffer.allocate(16).putLong(v.getMostSignificantBits()).putLong(v.getLeastSignificantBits())
                    .array();
        }
        try {
            return MessageDigest.getInstance("SHA-256").digest(serialised);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }
}
