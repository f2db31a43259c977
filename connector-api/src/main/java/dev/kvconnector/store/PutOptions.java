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
 * @param immutable the writer's promise that this key's value never changes (kvc-v1 keys are content-addressed):
 *     a store that declares {@link StoreCapability#IMMUTABLE} may then keep an existing value instead of removing
 *     and replacing it, and report the put as stored. Breaking the promise (a different value under the same key)
 *     leaves either value in such a store. Other stores put as usual.
 */
public record PutOptions(long ttlMillis, int replicas, Pin pin, boolean ifAbsent, boolean immutable) {
    /** No TTL beyond the store's default, one replica, no pin, replace, no immutability promise. */
    public static final PutOptions DEFAULT = new PutOptions(0, 1, Pin.NONE, false, false);

    /** Validates ranges. */
    public PutOptions {
        if (ttlMillis < 0 || replicas < 1 || pin == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "put options need ttlMillis >= 0, replicas >= 1 and a pin;"
                    + " got ttl=" + ttlMillis + "ms replicas=" + replicas + " pin=" + pin).build();
        }
    }

    /** Options without the immutability promise. */
    public PutOptions(long ttlMillis, int replicas, Pin pin, boolean ifAbsent) {
        this(ttlMillis, replicas, pin, ifAbsent, false);
    }

    /** These options with a TTL in milliseconds. */
    public PutOptions withTtlMillis(long ttl) {
        return new PutOptions(ttl, replicas, pin, ifAbsent, immutable);
    }

    /** These options with if-absent set. */
    public PutOptions withIfAbsent(boolean absent) {
        return new PutOptions(ttlMillis, replicas, pin, absent, immutable);
    }

    /** These options with a replica count. */
    public PutOptions withReplicas(int n) {
        return new PutOptions(ttlMillis, n, pin, ifAbsent, immutable);
    }

    /** These options with a pin. */
    public PutOptions withPin(Pin p) {
        return new PutOptions(ttlMillis, replicas, p, ifAbsent, immutable);
    }

    /** These options with the immutability promise set or cleared. */
    public PutOptions withImmutable(boolean promise) {
        return new PutOptions(ttlMillis, replicas, pin, ifAbsent, promise);
    }
}
