package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.ZmqKvEventSubscriber;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The kv-aware policy's view of the cluster: a {@link PrefixIndex} fed by each engine's events ({@link KvEventIngest}
 * off the socket, {@link KvEventFeed} into the index), and the hashing of a request's prompt the way the engines
 * hash it.
 *
 * <p>How the proxy gets a prompt's token ids: a {@code prompt} of token ids is used as it is; a text prompt is
 * tokenized by {@link KvTokenizer#BYTES} (one token per UTF-8 byte, the demo engine's tokenizer), or not at all with
 * {@link KvTokenizer#TOKEN_IDS} (for engines with a real tokenizer: send token ids to be routed by cache). Chats and
 * batches of prompts are not hashed ({@link KvMetrics.Reason#NO_TOKENS}) and go to the least loaded instances.
 *
 * <p>How it hashes them: with kvconnector's {@code kvc-v1} scheme from the root and chunk size that each publisher
 * puts in its topic frame ({@link dev.kvconnector.events.VllmKvEventCodec}), through
 * {@link KvcV1KeyScheme#planFromRoot}, the code the engines' connectors run: no layout or model to configure.
 * Requests in a namespace hash from another root and are not matched.
 */
final class KvRouter implements AutoCloseable {
    final PrefixIndex index = new PrefixIndex();
    final KvMetrics metrics = new KvMetrics();
    private final KvTokenizer tokenizer;
    private final Map<String, KvEventFeed> feeds = new ConcurrentHashMap<>();
    private final List<KvEventIngest> ingests = new ArrayList<>();
    private boolean closed;

    KvRouter(KvTokenizer tokenizer) {
        this.tokenizer = tokenizer;
    }

    /**
     * Subscribes to every endpoint, a {@link KvEventIngest} (two threads and a bounded queue) each; on a failure
     * closes what it started, then throws.
     */
    void subscribe(List<KvEventEndpoint> endpoints) {
        try {
            subscribeEach(endpoints);
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    private void subscribeEach(List<KvEventEndpoint> endpoints) {
        int queueMessages = KvEventIngest.queueMessages();
        long queueBytes = KvEventIngest.queueBytes();
        for (KvEventEndpoint ep : endpoints) {
            ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber(ep.instance(), ep.publish(), ep.replay(), "");
            try {
                KvEventFeed feed = feed(ep.instance(), KvEventIngest.replayOf(sub));
                ingests.add(new KvEventIngest(sub, feed, metrics, queueMessages, queueBytes));
            } catch (RuntimeException e) {
                sub.close();
                throw e;
            }
        }
    }

    /** A feed for {@code instance}, numbered next; for {@link #subscribe} and for tests that script streams. */
    synchronized KvEventFeed feed(String instance, KvEventFeed.Replay replay) {
        if (feeds.containsKey(instance)) {
            throw new IllegalArgumentException("two KV event streams for " + instance);
        }
        if (feeds.size() >= PrefixIndex.MAX_PUBLISHERS) {
            throw new IllegalArgumentException("more than " + PrefixIndex.MAX_PUBLISHERS
                    + " KV event streams; the index tells " + PrefixIndex.MAX_PUBLISHERS + " apart");
        }
        KvEventFeed feed = new KvEventFeed(instance, feeds.size(), index, metrics, replay);
        feeds.put(instance, feed);
        return feed;
    }

    /** The publisher number of {@code instance}, or -1 when it publishes no events. */
    int publisher(Instance instance) {
        KvEventFeed f = feeds.get(instance.name);
        return f == null ? -1 : f.publisher;
    }

    /** Where the index says {@code body}'s prompt is cached. */
    KvRoute route(JsonNode body) {
        int[] tokens = tokens(body.get("prompt"));
        if (tokens == null || tokens.length == 0) {
            return KvRoute.unhashed(KvMetrics.Reason.NO_TOKENS);
        }
        KvRoute best = null;
        String seenRoot = null;
        int seenChunk = 0;
        for (KvEventFeed f : feeds.values()) {
            KvEventSource s = f.source();
            if (s == null || s.rootHash() == null || s.chunkTokens() < 1
                    || s.rootHash().equals(seenRoot) && s.chunkTokens() == seenChunk) {
                continue;
            }
            seenRoot = s.rootHash();
            seenChunk = s.chunkTokens();
            KvRoute r = route(tokens, s.rootHash(), s.chunkTokens());
            if (best == null || r.storePrefix > best.storePrefix) {
                best = r;
            }
        }
        return best == null ? KvRoute.unhashed(KvMetrics.Reason.NO_INDEX) : best;
    }

    private KvRoute route(int[] tokens, String rootHex, int chunkTokens) {
        List<ChunkKeys> chunks = KvcV1KeyScheme.planFromRoot(HexFormat.of().parseHex(rootHex), chunkTokens, 0,
                RequestTokens.of(tokens)).chunks();
        String[] hashes = new String[chunks.size()];
        for (int c = 0; c < hashes.length; c++) {
            hashes[c] = chunks.get(c).hashHex();
        }
        int[] local = new int[PrefixIndex.MAX_PUBLISHERS];
        int store = index.match(hashes, local);
        return new KvRoute(null, hashes.length, store, tokens.length, chunkTokens, local);
    }

    /** The prompt's token ids, or null when it has none the proxy can take (see the class comment). */
    private int[] tokens(JsonNode prompt) {
        if (prompt == null) {
            return null;
        }
        if (prompt.isTextual()) {
            return tokenizer == KvTokenizer.BYTES ? bytes(prompt.textValue()) : null;
        }
        if (prompt.isArray() && prompt.size() == 1 && (prompt.get(0).isTextual() || prompt.get(0).isArray())) {
            return tokens(prompt.get(0));
        }
        if (prompt.isArray()) {
            int[] ids = new int[prompt.size()];
            for (int i = 0; i < ids.length; i++) {
                JsonNode t = prompt.get(i);
                if (!t.isIntegralNumber() || !t.canConvertToInt()) {
                    return null;
                }
                ids[i] = t.intValue();
            }
            return ids;
        }
        return null;
    }

    private static int[] bytes(String text) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        int[] ids = new int[b.length];
        for (int i = 0; i < b.length; i++) {
            ids[i] = b[i] & 0xff;
        }
        return ids;
    }

    /** Stops the event threads and closes their sockets; idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (KvEventIngest i : ingests) {
            i.close();
        }
    }
}
