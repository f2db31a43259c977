package dev.kvconnector.lmcache.store;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The byte objects the LMCache layout stores accept: an LMCache v1 {@code RemoteMetadata} of a fixed number of
 * groups ({@code 8 + 20 x groups} bytes), followed by exactly as many KV bytes as the metadata's first field,
 * {@code length}, says. Checking the framing here keeps a stray value (not an LMCache chunk) out of a cache that
 * LMCache instances read.
 */
final class LmChunkFraming {
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final int metadataBytes;
    private final String uri;

    LmChunkFraming(int groups, String uri) {
        this.metadataBytes = 8 + 20 * groups;
        this.uri = uri;
    }

    /** Bytes of the metadata header. */
    int metadataBytes() {
        return metadataBytes;
    }

    /**
     * The KV byte count of a value about to be stored.
     *
     * @throws KVException {@code INVALID_ARGUMENT} when the value is not metadata followed by {@code length} bytes
     */
    long kvBytesOfValue(MemorySegment value, String op, String key) {
        long size = value.byteSize();
        if (size < metadataBytes) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a value of " + size + " bytes is not an LMCache chunk "
                            + "object: it is shorter than the " + metadataBytes + "-byte RemoteMetadata")
                    .store(uri).operation(op).key(key).hint(hint()).build();
        }
        int length = value.get(INT, 0);
        if (length != size - metadataBytes) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a value of " + size + " bytes is not an LMCache chunk "
                            + "object: its RemoteMetadata says length=" + length + " but " + (size - metadataBytes)
                            + " bytes follow the " + metadataBytes + "-byte header")
                    .store(uri).operation(op).key(key).hint(hint()).build();
        }
        return length;
    }

    /**
     * Checks an object read back: its metadata's length must equal the KV bytes found.
     *
     * @throws KVException {@code CORRUPT_OBJECT} naming both numbers
     */
    void checkRead(MemorySegment object, long kvBytes, String op, String key) {
        int length = object.get(INT, 0);
        if (length != kvBytes) {
            throw corrupt("the RemoteMetadata says length=" + length + " but " + kvBytes + " KV bytes were read", op,
                    key);
        }
    }

    KVException corrupt(String detail, String op, String key) {
        return KVException.of(ErrorCode.CORRUPT_OBJECT, "LMCache chunk object: " + detail)
                .store(uri).operation(op).key(key)
                .hint("the object was written by another LMCache version (metadata-groups= sets the group count "
                        + "of the header) or by a writer that does not use the LMCache layout")
                .build();
    }

    private String hint() {
        return "LMCache layout stores hold chunk objects: an " + metadataBytes + "-byte RemoteMetadata (int32 LE "
                + "length, fmt, then dtype and 4 shape ints per group) followed by the KV bytes, as the LMCache codec "
                + "writes them; use the plain store URI for other values";
    }
}
