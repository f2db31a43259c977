package dev.kvconnector.proxy;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Probes every instance with {@code GET healthPath} each interval, on virtual threads, all instances at
 * once. An instance that fails {@code ejectAfterFailures} probes in a row stops getting requests; one that
 * then passes {@code readmitAfterSuccesses} probes in a row gets them again.
 */
final class HealthChecker implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(HealthChecker.class);

    private final ProxyConfig config;
    private final InstancePool pool;
    private final HttpClient client;
    private final Thread loop;
    private volatile boolean running = true;

    HealthChecker(ProxyConfig config, InstancePool pool, HttpClient client) {
        this.config = config;
        this.pool = pool;
        this.client = client;
        this.loop = Thread.ofVirtual().name("xpyd-health").start(this::runLoop);
    }

    private void runLoop() {
        try (var probes = Executors.newVirtualThreadPerTaskExecutor()) {
            while (running) {
                Thread.sleep(config.healthInterval());
                List<Instance> all = pool.all();
                Future<?>[] pending = new Future<?>[all.size()];
                for (int k = 0; k < all.size(); k++) {
                    Instance i = all.get(k);
                    pending[k] = probes.submit(() -> probe(i));
                }
                for (Future<?> f : pending) {
                    f.get();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (java.util.concurrent.ExecutionException e) {
            LOG.error("health checker stopped by an unexpected error; instances are no longer probed", e.getCause());
        }
    }

    private void probe(Instance i) {
        boolean ok;
        String why = null;
        try {
            HttpRequest req = HttpRequest.newBuilder(i.uri(config.healthPath())).timeout(config.healthTimeout()).GET()
                    .build();
            int status = client.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
            ok = status >= 200 && status < 300;
            if (!ok) {
                why = "answered " + status;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        } catch (Exception e) {
            ok = false;
            why = e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
        }
        if (i.recordProbe(ok, config.ejectAfterFailures(), config.readmitAfterSuccesses())) {
            if (ok) {
                LOG.info("{} readmitted: GET {} passes again", i, config.healthPath());
            } else {
                LOG.warn("{} ejected: GET {}{} failed {} times in a row ({})", i, i.base, config.healthPath(),
                        config.ejectAfterFailures(), why);
            }
        }
    }

    @Override
    public void close() {
        running = false;
        loop.interrupt();
        try {
            loop.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
