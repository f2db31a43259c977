package dev.kvconnector.store;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * Options of one put.
 *
 * @param ttlMillis time to live in milliseconds; 0 means the store's default (which may be "forever")
 * @param replicas copies to keep, for stores that replicate; at least 1
 * @param pin eviction protection, for stores that support it
 * @param ifAbsent store only when the key does not exist yet; otherwise a put replaces the value
 */
public record PutOptions(long ttlMillis, int replicas, Pin pin, boolean ifAbsent) {
    /** No TTL beyond the store's default, one replica, no pin, replace. */
    public static final PutOptions DEFAULT = new PutOptions(0, 1, Pin.NONE, false);

    /** Validates ranges. */
    public PutOptions {
        if (ttlMillis < 0 || replicas < 1 || pin == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "put options need ttlMillis >= 0, replicas >= 1 and a pin;"
                    + " got ttl=" + ttlMillis + "ms replicas=" + replicas + " pin=" + pin).build();
        }
    }

    /** These options with a TTL in milliseconds. */
    public PutOptions withTtlMillis(long ttl) {
        return new PutOptions(ttl, replicas, pin, ifAbsent);
    }

    /** These options with if-absent set. */
    public PutOptions withIfAbsent(boolean absent) {
        return new PutOptions(ttlMillis, replicas, pin, absent);
    }

    /** These options with a replica count. */
    public PutOptions withReplicas(int n) {
        return new PutOptions(ttlMillis, n, pin, ifAbsent);
    }

    /** These options with a pin. */
    public PutOptions withPin(Pin p) {
        return new PutOptions(ttlMillis, replicas, p, ifAbsent);
    }
}
