package dev.kvconnector.proxy;

/** What the proxy does when a prefill instance fails (connection error, timeout, 5xx). */
public enum PrefillFailureMode {
    /** Send the prefill to another prefill instance; the client gets a 502 when every attempt fails. */
    RETRY,
    /** Give up on the prefill and let the decode instance compute the prompt alone. */
    DECODE_ONLY
}
