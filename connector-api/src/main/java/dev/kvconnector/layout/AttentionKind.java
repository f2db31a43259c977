package dev.kvconnector.layout;

/** How a model's attention keeps its cache. */
public enum AttentionKind {
    /** Multi-head or grouped-query attention: a K and a V tensor per layer. */
    MHA,
    /** Multi-head latent attention (DeepSeek): one latent tensor per layer. */
    MLA
}
