package dev.kvconnector.benchmarks;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.kvconnector.proxy.ProxyConfig;
import dev.kvconnector.proxy.ProxyFlow;
import dev.kvconnector.proxy.XpydProxy;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.HdrHistogram.Histogram;

/**
 * The proxy's load test: {@code clients} concurrent streaming completions against instant prefill and decode
 * instances on loopback, measured once straight to the instances (P's one-token request, then D's stream, as the
 * proxy's V0 flow does) and once through the proxy. The difference of the latency percentiles is the proxy's
 * overhead per request; the goal is at most 1 ms at p50 and 5 ms at p99.
 *
 * <p>Not a JMH benchmark: it measures a server under concurrent load, which JMH's per-thread harness does not model.
 * Run it with {@code java --enable-native-access=ALL-UNNAMED -cp benchmarks/target/benchmarks.jar
 * dev.kvconnector.benchmarks.ProxyLoadTest [clients] [requestsPerClient]}.
 */
public final class ProxyLoadTest {
    private static final String MODEL = "load-test-model";
    private static final byte[] MODELS = ("{\"object\":\"list\",\"data\":[{\"id\":\"" + MODEL + "\",\"object\":\"model\"}]}")
            .getBytes(StandardCharsets.UTF_8);
    private static final byte[] ONE_TOKEN = ("{\"id\":\"p\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
            + "\"text\":\"x\",\"finish_reason\":\"length\"}]}").getBytes(StandardCharsets.UTF_8);
    private static final String BODY = "{\"model\":\"" + MODEL + "\",\"prompt\":\"the quick brown fox\",\"max_tokens\":8,"
            + "\"stream\":true}";
    private static final String PREFILL_BODY = "{\"model\":\"" + MODEL + "\",\"prompt\":\"the quick brown fox\","
            + "\"max_tokens\":1,\"stream\":false}";

    private ProxyLoadTest() {
    }

    /** An OpenAI-compatible instance that answers at once: a test double of vLLM, for load only. */
    static HttpServer instantInstance() throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 1024);
        s.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        s.createContext("/v1/models", ex -> reply(ex, MODELS));
        s.createContext("/health", ex -> reply(ex, new byte[0]));
        s.createContext("/v1/completions", ProxyLoadTest::completion);
        s.start();
        return s;
    }

    private static void completion(HttpExchange ex) throws IOException {
        byte[] body;
        try (InputStream in = ex.getRequestBody()) {
            body = in.readAllBytes();
        }
        if (!new String(body, StandardCharsets.UTF_8).contains("\"stream\":true")) {
            reply(ex, ONE_TOKEN);
            return;
        }
        ex.getResponseHeaders().set("Content-Type", "text/event-stream");
        ex.sendResponseHeaders(200, 0);
        try (OutputStream out = ex.getResponseBody()) {
            for (int i = 0; i < 8; i++) {
                out.write(("data: {\"choices\":[{\"index\":0,\"text\":\"t" + i + "\"}]}\n\n")
                        .getBytes(StandardCharsets.UTF_8));
                out.flush();
            }
            out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
        }
    }

    private static void reply(HttpExchange ex, byte[] body) throws IOException {
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(200, body.length == 0 ? -1 : body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }

    /** Runs the load test and prints the overhead; exits 1 when a goal is missed. */
    public static void main(String[] args) throws Exception {
        int clients = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        int perClient = args.length > 1 ? Integer.parseInt(args[1]) : 10;
        System.setProperty("sun.net.httpserver.nodelay", "true");
        // The JDK server closes idle keep-alive connections beyond 200 (its default), which a client may be about to
        // reuse; with 200 clients plus the proxy's own pool, allow more.
        System.setProperty("sun.net.httpserver.maxIdleConnections", "4096");
        HttpServer p = instantInstance();
        HttpServer d = instantInstance();
        String pAddr = "127.0.0.1:" + p.getAddress().getPort();
        String dAddr = "127.0.0.1:" + d.getAddress().getPort();
        try (XpydProxy proxy = new XpydProxy(ProxyConfig.builder(MODEL).port(0).prefill(pAddr).decode(dAddr)
                .flow(ProxyFlow.V0).build()).start();
             HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                     .executor(Executors.newVirtualThreadPerTaskExecutor()).connectTimeout(Duration.ofSeconds(5)).build()) {
            URI viaProxy = URI.create("http://127.0.0.1:" + proxy.port() + "/v1/completions");
            URI toP = URI.create("http://" + pAddr + "/v1/completions");
            URI toD = URI.create("http://" + dAddr + "/v1/completions");
            run(clients, 2, () -> direct(http, toP, toD));
            run(clients, 2, () -> once(http, viaProxy, BODY));
            Histogram direct = run(clients, perClient, () -> direct(http, toP, toD));
            Histogram proxied = run(clients, perClient, () -> once(http, viaProxy, BODY));
            double p50 = (proxied.getValueAtPercentile(50) - direct.getValueAtPercentile(50)) / 1e6;
            double p99 = (proxied.getValueAtPercentile(99) - direct.getValueAtPercentile(99)) / 1e6;
            System.out.printf("proxy load test: %d concurrent streaming clients x %d requests, instant instances, "
                    + "flow v0, load average %s%n", clients, perClient, loadAverage());
            System.out.printf("  direct  (P then D): p50 %.2f ms  p99 %.2f ms%n", direct.getValueAtPercentile(50) / 1e6,
                    direct.getValueAtPercentile(99) / 1e6);
            System.out.printf("  proxied           : p50 %.2f ms  p99 %.2f ms%n", proxied.getValueAtPercentile(50) / 1e6,
                    proxied.getValueAtPercentile(99) / 1e6);
            System.out.printf("  overhead          : p50 %.2f ms (goal <= 1)  p99 %.2f ms (goal <= 5)%n", p50, p99);
            if (p50 > 1 || p99 > 5) {
                System.out.println("  GOAL MISSED");
                System.exit(1);
            }
            System.out.println("  goals met");
        } finally {
            p.stop(0);
            d.stop(0);
        }
    }

    private interface Call {
        void run() throws Exception;
    }

    private static void direct(HttpClient http, URI p, URI d) throws Exception {
        once(http, p, PREFILL_BODY);
        once(http, d, BODY);
    }

    private static void once(HttpClient http, URI uri, String body) throws Exception {
        HttpResponse<byte[]> r = http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofByteArray());
        if (r.statusCode() != 200) {
            throw new IllegalStateException(uri + " answered " + r.statusCode() + ": "
                    + new String(r.body(), StandardCharsets.UTF_8));
        }
    }

    private static Histogram run(int clients, int perClient, Call call) throws Exception {
        Histogram h = new Histogram(60_000_000_000L, 3);
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<?>> fs = new ArrayList<>();
            for (int c = 0; c < clients; c++) {
                fs.add(pool.submit(() -> {
                    for (int i = 0; i < perClient; i++) {
                        long t0 = System.nanoTime();
                        call.run();
                        long t = System.nanoTime() - t0;
                        synchronized (h) {
                            h.recordValue(Math.min(t, 60_000_000_000L));
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        }
        return h;
    }

    private static String loadAverage() {
        try {
            return java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).trim();
        } catch (IOException e) {
            return "unknown";
        }
    }
}
