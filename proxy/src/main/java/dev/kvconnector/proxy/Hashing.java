package dev.kvconnector.proxy;

/** Allocation-free string hashing for instance selection (not for security). */
final class Hashing {
    private Hashing() {
    }

    /** FNV-1a over the UTF-16 chars of the first {@code limit} characters. */
    static long fnv1a(CharSequence s, int limit) {
        long h = 0xcbf29ce484222325L;
        int n = Math.min(limit, s.length());
        for (int i = 0; i < n; i++) {
            h ^= s.charAt(i);
            h *= 0x100000001b3L;
        }
        return h;
    }

    static long fnv1a(CharSequence s) {
        return fnv1a(s, s.length());
    }

    /** SplitMix64 finaliser: spreads the bits so close inputs land far apart. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }
}
