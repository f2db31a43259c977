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
    PREFIX_AFFINITY,
    /**
     * Where the prompt's KV already is, from the engines' KV events ({@link KvRouter}): each instance scores
     * {@code 2 * overlap - load}, the chunks of the prompt's prefix in its own cache minus its requests in flight;
     * the best scorer takes it, ties go round robin. When the shared store holds the whole prompt, P is skipped and D
     * loads it (a decode-only request, counted). Requests the proxy cannot hash go to the least loaded instance.
     */
    KV_AWARE
}
