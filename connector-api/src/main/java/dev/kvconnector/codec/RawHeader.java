package dev.kvconnector.codec;

import dev.kvconnector.tensor.TensorSpec;

/**
 * Every field of a {@link RawTensorFormat} header, as {@link RawTensorFormat#readHeader} read it. For tools and
 * diagnostics; the hot path uses {@link RawTensorFormat#validate} instead.
 *
 * @param version the format version (1)
 * @param spec the payload's dtype and shape
 * @param tokens the token count the object covers, or 0
 * @param layoutFingerprint the writer's {@code KVLayout.fingerprint()}, or 0
 * @param payloadBytes payload size in bytes
 * @param flags the flag bits ({@link RawTensorFormat#FLAG_NO_CHECKSUM})
 * @param payloadSum the stored payload checksum ({@code WordSum}), 0 without checksum
 * @param headerCrc the stored CRC32C of header bytes 0..59
 */
public record RawHeader(int version, TensorSpec spec, int tokens, long layoutFingerprint, long payloadBytes,
                        int flags, int payloadSum, int headerCrc) {

    /** Whether the payload carries a checksum. */
    public boolean checksummed() {
        return (flags & RawTensorFormat.FLAG_NO_CHECKSUM) == 0;
    }

    /** The object's total size in bytes: header plus payload. */
    public long objectBytes() {
        return RawTensorFormat.HEADER_BYTES + payloadBytes;
    }
}
