package dev.kvconnector.proxy;

/** How the proxy picks one instance among the healthy instances of a role. */
public enum Policy {
    /** Each role cycles through its instances in order. */
    ROUND_ROBIN,
    /** The instance with the fewest requests in flight from this proxy; ties go round robin. */
    LEAST_OUTSTANDING,
    /**
     * The first {@link ProxyConfig#prefixAffinityChars()} characters of the prompt choose the instance by
     * rendezvous hashing, so a repeated prefix lands where its KV is likely cached. When that instance is
     * unhealthy, the next instance in that prompt's hash order takes it; other prompts keep their instance.
     */
    PREFIX_AFFINITY
}
