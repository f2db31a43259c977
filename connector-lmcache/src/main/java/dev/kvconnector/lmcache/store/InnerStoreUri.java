package dev.kvconnector.lmcache.store;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.StoreUri;
import java.util.Map;
import java.util.Set;

/**
 * Opens the store under an LMCache layout: {@code lmcache+valkey://h:p?layout=..&ttl=..} opens
 * {@code valkey://h:p?ttl=..} through {@link KVStores}, without the options the layout itself consumes.
 */
final class InnerStoreUri {
    /** The scheme prefix of every LMCache layout store. */
    static final String PREFIX = "lmcache+";

    private InnerStoreUri() {
    }

    /** The inner scheme: {@code valkey} of {@code lmcache+valkey}. */
    static String innerScheme(StoreUri uri) {
        return uri.scheme().substring(PREFIX.length());
    }

    /** Opens the inner store, with every option except {@code own}. */
    static KVStore open(StoreUri uri, Set<String> own, String needsModule) {
        String inner = text(uri, innerScheme(uri), own);
        try {
            return KVStores.open(inner);
        } catch (KVException e) {
            if (e.code() != ErrorCode.UNKNOWN_STORE) {
                throw e;
            }
            throw KVException.of(ErrorCode.UNKNOWN_STORE, uri.scheme() + ": stores the LMCache layout in a "
                            + innerScheme(uri) + ":// store, and no provider handles " + innerScheme(uri) + ":")
                    .store(uri.masked()).operation("open").cause(e)
                    .hint("put the " + needsModule + " jar on the class path").build();
        }
    }

    /** The inner URI as text, the password included (it is parsed again at once, never logged). */
    static String text(StoreUri uri, String scheme, Set<String> own) {
        StringBuilder sb = new StringBuilder(scheme).append(':');
        if (!uri.hosts().isEmpty() || uri.user() != null || uri.password() != null) {
            sb.append("//");
            if (uri.user() != null || uri.password() != null) {
                sb.append(uri.user() == null ? "" : StoreUri.encode(uri.user()));
                if (uri.password() != null) {
                    sb.append(':').append(StoreUri.encode(uri.password()));
                }
                sb.append('@');
            }
            for (int i = 0; i < uri.hosts().size(); i++) {
                StoreUri.HostPort hp = uri.hosts().get(i);
                sb.append(i == 0 ? "" : ",").append(hp.host().indexOf(':') >= 0 ? "[" + hp.host() + "]" : hp.host());
                if (hp.port() > 0) {
                    sb.append(':').append(hp.port());
                }
            }
        }
        sb.append(uri.path());
        char sep = '?';
        for (Map.Entry<String, String> e : uri.params().entrySet()) {
            if (!own.contains(e.getKey())) {
                sb.append(sep).append(StoreUri.encode(e.getKey())).append('=')
                        .append(StoreUri.encode(e.getValue()));
                sep = '&';
            }
        }
        return sb.toString();
    }
}
