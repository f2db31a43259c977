package dev.kvconnector.codec;

import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.layout.KVLayout;

/**
 * The codec a key scheme implies, found through {@link java.util.ServiceLoader} by {@link ObjectCodecs#forScheme}: so
 * that a connector configured with a key scheme's name alone (for example {@code lmcache-v1}) lays out that scheme's
 * objects. Implementations are stateless.
 */
public interface ObjectCodecProvider {
    /** The key scheme's name, as {@link dev.kvconnector.key.KeyScheme#name()} says it. */
    String scheme();

    /** The default codec for the objects that {@code scheme} (named {@link #scheme()}) names, for {@code layout}. */
    ObjectCodec codec(KeyScheme scheme, KVLayout layout);
}
