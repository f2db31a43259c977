package dev.kvconnector.demo;

import dev.kvconnector.connector.MissReason;
import java.util.Map;

/**
 * An engine's counters since it started.
 *
 * @param requests calls to {@link Engine#generate}
 * @param promptTokens prompt tokens of those calls
 * @param prefillPasses prefill forward passes (a full or partial prompt, computed here)
 * @param prefillTokens prompt tokens computed here (the rest were loaded, or reused from the prefix cache)
 * @param decodeSteps single-token forward passes
 * @param loadedPrefills prompts whose KV was loaded whole from the store
 * @param partialLoads prompts of which only a prefix was loaded
 * @param misses lookups that found nothing usable, by reason
 * @param loadFailures lookups that failed with a store error (the prefill was recomputed)
 * @param inserts prefills inserted and committed
 * @param insertFailures inserts that failed with a store error (the request was still served)
 */
public record EngineMetrics(long requests, long promptTokens, long prefillPasses, long prefillTokens, long decodeSteps,
                            long loadedPrefills, long partialLoads, Map<MissReason, Long> misses, long loadFailures,
                            long inserts, long insertFailures) {
    /** Misses of one reason. */
    public long misses(MissReason reason) {
        return misses.getOrDefault(reason, 0L);
    }
}
