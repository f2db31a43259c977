package dev.kvconnector.codec;

/** When a stored object holds everything it will hold, so that it can be sealed (header, checksum) and put. */
public enum Completion {
    /** Each object holds one chunk's one layer: it is complete as soon as that layer is in (kvconnector's raw). */
    PER_LAYER,
    /**
     * Each object holds every layer of a chunk (LMCache chunk objects) or of the whole request, planned as one
     * chunk (vLLM V0): it is complete once the chunk's last layer is in.
     */
    PER_CHUNK
}
