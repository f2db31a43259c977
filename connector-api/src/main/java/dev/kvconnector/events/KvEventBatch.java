package dev.kvconnector.events;

import java.util.List;

/**
 * One message of a publisher's stream, decoded: vLLM's {@code KVEventBatch} with the frames around it.
 *
 * @param source what the topic frame says about the publisher: its epoch (0 from a vLLM engine, which sends
 *               none), chunk size and hash root (0 and null when not sent)
 * @param sequence the batch's number within the epoch (vLLM's 8-byte sequence frame), from 0, one more per batch
 * @param timestampSeconds when the publisher sent it, seconds since the epoch (vLLM's {@code ts})
 * @param events the events, each carrying this batch's epoch and sequence
 */
public record KvEventBatch(KvEventSource source, long sequence, double timestampSeconds, List<KvEvent> events) {
    /** The publisher's epoch. */
    public long epoch() {
        return source.epoch();
    }
}
