package dev.kvconnector.mooncake;

/**
 * What a remove (and so a replacing put) does when a reader holds a lease on the object (Mooncake's -706): the
 * {@code lease-policy=} URI option.
 */
public enum LeasePolicy {
    /**
     * Retry until the lease ends (Mooncake's {@code default_kv_lease_ttl}, 10 s by default), up to {@code lease-wait}.
     * Safe against readers in other processes that are still copying the object.
     */
    WAIT,
    /**
     * Remove at once with {@code force}. Use it when readers are known to be done, as in drop-after-read: a reader
     * still copying the object could read freed memory.
     */
    FORCE
}
