package dev.kvconnector.connector;

/** Why a drop-select found nothing usable. The engine recomputes in every case; the reason goes to metrics. */
public enum MissReason {
    /** No committed entry for the request's first chunk. */
    ABSENT,
    /** Layer-wise mode waited past its deadline for a layer, the hidden states or the commit. */
    TIMED_OUT,
    /** The entry was written for another layout (model, heads, dtype) or with another shape. */
    LAYOUT_MISMATCH,
    /** The entry's bytes fail validation (truncated, checksum, bad header). */
    CORRUPT
}
