package dev.kvconnector.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;

/** Finds key schemes by name through {@link ServiceLoader}. */
public final class KeySchemes {
    /** The scheme used when none is configured. */
    public static final String DEFAULT = "kvc-v1";

    private KeySchemes() {
    }

    /** The scheme with this name; unknown names are an {@code INVALID_ARGUMENT} error listing the known ones. */
    public static KeyScheme byName(String name) {
        Map<String, KeyScheme> all = all();
        KeyScheme s = all.get(name);
        if (s == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "unknown key scheme '" + name + "'")
                    .hint("known schemes: " + String.join(", ", all.keySet())).build();
        }
        return s;
    }

    /** Every scheme on the class path by name. */
    public static Map<String, KeyScheme> all() {
        Map<String, KeyScheme> m = new TreeMap<>();
        for (KeyScheme s : ServiceLoader.load(KeyScheme.class, KeySchemes.class.getClassLoader())) {
            m.putIfAbsent(s.name(), s);
        }
        return m;
    }
}
