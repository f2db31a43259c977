package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * A proxy's Prometheus {@code /metrics}, scraped into a map from series (name and labels) to value, and sampled every
 * 100 ms for the largest value of each series.
 */
final class MetricsScraper implements AutoCloseable {
    private static final long SAMPLE_MILLIS = 100;
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    private final HttpRequest request;
    private final Map<String, Double> sampledMax = new HashMap<>();
    private Thread sampler;
    private volatile boolean sampling;

    MetricsScraper(String proxyAddr) {
        request = HttpRequest.newBuilder(URI.create("http://" + proxyAddr + "/metrics"))
                .timeout(Duration.ofSeconds(10)).GET().build();
    }

    /** One scrape: each series' value. */
    Map<String, Double> scrape() throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(request, HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new IOException(request.uri() + " answered " + r.statusCode());
        }
        Map<String, Double> m = new HashMap<>();
        for (String line : r.body().split("\n")) {
            int space = line.lastIndexOf(' ');
            if (!line.startsWith("#") && space > 0) {
                m.put(line.substring(0, space), Double.parseDouble(line.substring(space + 1)));
            }
        }
        return m;
    }

    /** Waits until the index holds {@code chunks} chunks: the link is live and the seed applied. */
    void awaitIndexed(long chunks) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        Double n;
        while ((n = scrape().get("xpyd_kv_index_chunks")) == null || n < chunks) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the proxy indexed " + n + " chunks in 60 s, not " + chunks);
            }
            Thread.sleep(200);
        }
    }

    /** Starts sampling every 100 ms, forgetting what an earlier sampling saw. */
    void startSampling() {
        synchronized (sampledMax) {
            sampledMax.clear();
        }
        sampling = true;
        sampler = Thread.ofPlatform().daemon().name("metrics-scraper").start(() -> {
            while (sampling) {
                try {
                    Map<String, Double> m = scrape();
                    synchronized (sampledMax) {
                        m.forEach((k, v) -> sampledMax.merge(k, v, Math::max));
                    }
                    Thread.sleep(SAMPLE_MILLIS);
                } catch (IOException | InterruptedException e) {
                    return;
                }
            }
        });
    }

    /** Stops sampling; returns each series' largest value sampled. */
    Map<String, Double> stopSampling() throws InterruptedException {
        sampling = false;
        sampler.join();
        synchronized (sampledMax) {
            return new HashMap<>(sampledMax);
        }
    }

    @Override
    public void close() {
        http.close();
    }
}
