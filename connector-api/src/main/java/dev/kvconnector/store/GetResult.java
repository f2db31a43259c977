package dev.kvconnector.store;

/**
 * Decodes the {@code long} that {@link KVStore#getInto} returns, without allocating.
 *
 * <ul>
 *   <li>{@code r >= 0}: a hit; {@code r} bytes were copied into the destination.</li>
 *   <li>{@code r == MISS}: no such key.</li>
 *   <li>{@code r <= TOO_SMALL_BASE}: the destination is too small; nothing was copied and
 *       {@link #requiredSize(long)} gives the object's size in bytes.</li>
 * </ul>
 *
 * <pre>{@code
 * long r = store.getInto(key, dst);
 * if (GetResult.isHit(r)) { use(dst.asSlice(0, r)); }
 * else if (GetResult.isTooSmall(r)) { grow(GetResult.requiredSize(r)); }
 * else { recompute(); }
 * }</pre>
 */
public final class GetResult {
    /** The key does not exist (or has expired). */
    public static final long MISS = -1;
    /** Too-small results are {@code TOO_SMALL_BASE - size}. */
    public static final long TOO_SMALL_BASE = -2;

    private GetResult() {
    }

    /** The result for a destination too small for an object of {@code size} bytes. */
    public static long tooSmall(long size) {
        return TOO_SMALL_BASE - size;
    }

    /** Whether bytes were copied. */
    public static boolean isHit(long r) {
        return r >= 0;
    }

    /** Whether the key was absent. */
    public static boolean isMiss(long r) {
        return r == MISS;
    }

    /** Whether the destination was too small. */
    public static boolean isTooSmall(long r) {
        return r <= TOO_SMALL_BASE;
    }

    /** For a too-small result, the object's size in bytes. */
    public static long requiredSize(long r) {
        if (!isTooSmall(r)) {
            throw new IllegalArgumentException("result " + r + " is not a too-small result");
        }
        return TOO_SMALL_BASE - r;
    }

    /** A readable form, for logs and tests. */
    public static String describe(long r) {
        return isHit(r) ? "hit(" + r + " bytes)" : isMiss(r) ? "miss" : "too-small(needs " + requiredSize(r) + " bytes)";
    }
}
