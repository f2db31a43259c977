package dev.kvconnector.valkey.testing;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * A real cluster of masters without replicas, joined with {@code redis-cli --cluster create}. Each node gets a
 * fresh directory (a leftover nodes.conf makes create refuse) and a port P at most 55535 whose bus port P + 10000
 * is free too. {@link #close()} stops every node.
 */
public final class RedisCluster implements AutoCloseable {
    private final List<RedisServerProcess> nodes = new ArrayList<>();

    private RedisCluster() {
    }

    /** Starts {@code masters} nodes, creates the cluster and waits until every node reports cluster_state:ok. */
    public static RedisCluster start(int masters) {
        RedisServerProcess.findBinary();
        RedisCluster c = new RedisCluster();
        try {
            List<String> create = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
            for (int i = 0; i < masters; i++) {
                int port = clusterPort();
                c.nodes.add(RedisServerProcess.startOnPort(port, "--cluster-enabled", "yes", "--cluster-config-file",
                        "nodes-" + port + ".conf", "--cluster-node-timeout", "5000"));
                create.add("127.0.0.1:" + port);
            }
            create.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
            String out = run(create);
            if (!out.contains("All 16384 slots covered")) {
                throw new IllegalStateException("redis-cli --cluster create failed: " + out);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            for (RedisServerProcess n : c.nodes) {
                while (!cli(n, "cluster", "info").contains("cluster_state:ok")) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("the cluster did not become ok in 30 s");
                    }
                    Thread.sleep(100);
                }
            }
            return c;
        } catch (IOException | InterruptedException | RuntimeException e) {
            c.close();
            throw new IllegalStateException("cannot start a " + masters + "-master cluster", e);
        }
    }

    /** The nodes, in creation order. */
    public List<RedisServerProcess> nodes() {
        return nodes;
    }

    /** {@code host:port,host:port,...} of every node. */
    public String seeds() {
        StringBuilder b = new StringBuilder();
        for (RedisServerProcess n : nodes) {
            b.append(b.isEmpty() ? "" : ",").append(n.hostPort());
        }
        return b.toString();
    }

    /** Runs {@code redis-cli -p port args...} against a node and returns its output, trimmed. */
    public static String cli(RedisServerProcess node, String... args) throws IOException, InterruptedException {
        List<String> c = new ArrayList<>(List.of("redis-cli", "-p", Integer.toString(node.port())));
        c.addAll(List.of(args));
        return run(c).trim();
    }

    private static int clusterPort() throws IOException {
        for (int attempt = 0; attempt < 200; attempt++) {
            int p = ThreadLocalRandom.current().nextInt(20_000, 45_000);
            if (free(p) && free(p + 10_000)) {
                return p;
            }
        }
        throw new IOException("no free port pair P, P + 10000");
    }

    private static boolean free(int port) {
        try (ServerSocket s = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static String run(List<String> cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
        }
        return out;
    }

    @Override
    public void close() {
        nodes.forEach(RedisServerProcess::close);
    }
}
