package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.AfterEach;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;

/** Starts test doubles and proxies on free 127.0.0.1 ports and stops them all after each test. */
abstract class ProxyTestBase {
    static final String MODEL = "test-model";
    static final ObjectMapper JSON = new ObjectMapper();

    private final List<AutoCloseable> started = new ArrayList<>();
    final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    @AfterEach
    void stopEverything() throws Exception {
        try {
            assertNoRequestLeftInFlight();
        } finally {
            stopAll();
        }
    }

    /** Leak check: every upstream slot a proxy took was given back once the doubles are released. */
    private void assertNoRequestLeftInFlight() throws InterruptedException {
        for (AutoCloseable c : started) {
            if (c instanceof XpydProxy proxy) {
                for (Instance i : proxy.pool.all()) {
                    long end = System.nanoTime() + 5_000_000_000L;
                    while (i.outstanding.get() != 0 && System.nanoTime() < end) {
                        Thread.sleep(10);
                    }
                    if (i.outstanding.get() != 0) {
                        throw new AssertionError(i + " still has " + i.outstanding.get() + " requests in flight");
                    }
                }
            }
        }
    }

    private void stopAll() throws Exception {
        for (int k = started.size() - 1; k >= 0; k--) {
            started.get(k).close();
        }
        started.clear();
        http.close();
    }

    VllmInstanceTestDouble instance(String name) throws IOException {
        VllmInstanceTestDouble d = new VllmInstanceTestDouble(name, MODEL);
        started.add(d);
        return d;
    }

    /** Test defaults: loopback, free port, no health probing, short timeouts. */
    static ProxyConfig.Builder config() {
        return ProxyConfig.builder(MODEL).bindHost("127.0.0.1").port(0).healthInterval(Duration.ZERO)
                .connectTimeout(Duration.ofSeconds(2)).firstByteTimeout(Duration.ofSeconds(5))
                .totalTimeout(Duration.ofSeconds(20));
    }

    XpydProxy start(ProxyConfig.Builder builder) throws IOException {
        XpydProxy p = new XpydProxy(builder.build());
        started.add(p);
        return p.start();
    }

    HttpResponse<String> post(XpydProxy proxy, String path, String json) throws Exception {
        return http.send(HttpRequest.newBuilder(proxy.uri().resolve(path))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<String> get(XpydProxy proxy, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(proxy.uri().resolve(path)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
    }

    static URI uri(XpydProxy proxy, String path) {
        return proxy.uri().resolve(path);
    }

    static JsonNode json(String s) throws IOException {
        return JSON.readTree(s);
    }

    /** Polls {@code condition} every 10 ms and fails naming {@code what} if it is still false after 10 s. */
    static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
        long end = System.nanoTime() + 10_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(10);
        }
    }
}
