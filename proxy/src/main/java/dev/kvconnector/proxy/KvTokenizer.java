package dev.kvconnector.proxy;

/** How the kv-aware policy turns a text prompt into the token ids it hashes. */
public enum KvTokenizer {
    /** One token per UTF-8 byte: the demo engine's tokenizer. */
    BYTES,
    /** None: only prompts sent as token ids are hashed (engines with a real tokenizer). */
    TOKEN_IDS
}
