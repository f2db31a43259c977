package dev.kvconnector.store.tiered;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/**
 * How a {@link TieredStore} writes, reads and bounds its write-back, from the options after the tier list
 * ({@code tiered:[..][..]?write=back&promote=never}).
 *
 * @param writeBack        {@code write=back}: a put is acknowledged once the first tier holds it, and I/O threads
 *                         copy it to the other tiers; {@code write=through} (the default): once every tier holds it
 * @param promoteOnHit     {@code promote=on-hit} (the default): a read served by a lower tier copies the object into
 *                         the tiers above it; {@code promote=never} leaves them alone
 * @param queueCapacity    {@code write-back-queue}: most objects waiting to be written back (default 1024)
 * @param dropOldest       {@code write-back-overflow=drop-oldest} (the default): a put into a full queue drops the
 *                         oldest waiting write-back and counts it; {@code refuse}: the put fails with
 *                         {@code STORE_FULL} (a claim answers {@code FULL}) and nothing is stored
 * @param threads          {@code write-back-threads}: I/O threads that write back (default 2)
 * @param drainMillis      {@code drain-timeout}: how long {@code close()} waits for waiting write-backs (default 5s)
 * @param bufferBytes      {@code buffer}: off-heap memory for write-back reads from a first tier without views, and
 *                         for views served by a lower tier (default 256MiB, allocated as used)
 */
public record TieredOptions(boolean writeBack, boolean promoteOnHit, int queueCapacity, boolean dropOldest,
                            int threads, long drainMillis, long bufferBytes) {
    /** The option names a {@code tiered:} URI accepts. */
    public static final Set<String> NAMES = Set.of("write", "promote", "write-back-queue", "write-back-overflow",
            "write-back-threads", "drain-timeout", "buffer");

    /** Write-through, promote on hit, and the defaults above. */
    public static final TieredOptions DEFAULT = new TieredOptions(false, true, 1024, true, 2, 5_000, 256L << 20);

    public TieredOptions {
        if (queueCapacity < 1 || threads < 1 || drainMillis < 0 || bufferBytes < 1) {
            throw new IllegalArgumentException("write-back-queue, write-back-threads and buffer must be positive, "
                    + "drain-timeout not negative: " + queueCapacity + ", " + threads + ", " + bufferBytes + ", "
                    + drainMillis);
        }
    }

    /** These options with write-back on or off. */
    public TieredOptions withWriteBack(boolean back) {
        return new TieredOptions(back, promoteOnHit, queueCapacity, dropOldest, threads, drainMillis, bufferBytes);
    }

    /** These options with a write-back queue of {@code capacity} objects, dropping the oldest or refusing. */
    public TieredOptions withQueue(int capacity, boolean dropOldestWhenFull) {
        return new TieredOptions(writeBack, promoteOnHit, capacity, dropOldestWhenFull, threads, drainMillis,
                bufferBytes);
    }

    /** These options with promotion on hit on or off. */
    public TieredOptions withPromoteOnHit(boolean promote) {
        return new TieredOptions(writeBack, promote, queueCapacity, dropOldest, threads, drainMillis, bufferBytes);
    }

    /** Reads the options of a {@code tiered:} URI; an unknown option or value is an {@code INVALID_URI} error. */
    static TieredOptions of(StoreUri uri) {
        uri.requireKnownParams(NAMES).requireNoUserInfo();
        return new TieredOptions(
                choice(uri, "write", "back", "through", "through"),
                choice(uri, "promote", "on-hit", "never", "on-hit"),
                positive(uri, "write-back-queue", DEFAULT.queueCapacity),
                choice(uri, "write-back-overflow", "drop-oldest", "refuse", "drop-oldest"),
                positive(uri, "write-back-threads", DEFAULT.threads),
                uri.durationMillisParam("drain-timeout", DEFAULT.drainMillis),
                Math.max(1, uri.sizeParam("buffer", DEFAULT.bufferBytes)));
    }

    /** Whether option {@code name} is {@code yes} rather than {@code no}; absent means {@code dflt}. */
    private static boolean choice(StoreUri uri, String name, String yes, String no, String dflt) {
        String v = uri.params().getOrDefault(name, dflt);
        if (!v.equals(yes) && !v.equals(no)) {
            throw KVException.of(ErrorCode.INVALID_URI, "option " + name + "=" + v + " is neither " + yes + " nor "
                    + no).store(uri.masked()).build();
        }
        return v.equals(yes);
    }

    private static int positive(StoreUri uri, String name, int dflt) {
        int v = uri.intParam(name, dflt);
        if (v < 1) {
            throw KVException.of(ErrorCode.INVALID_URI, "option " + name + "=" + v + " must be at least 1")
                    .store(uri.masked()).build();
        }
        return v;
    }
}
