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
 * A real cluster, joined with {@code redis-cli --cluster create}: masters, optionally a replica per master, and
 * optionally TLS for clients and the cluster bus. Each node gets a fresh directory (a leftover nodes.conf makes create
 * refuse) and a cluster port P at most 55535 whose bus port P + 10000 is free too; with TLS, P is the node's TLS
 * port and the plain port (used by {@link #cli}) is any free one. {@link #close()} stops every node.
 */
public final class RedisCluster implements AutoCloseable {
    private final List<RedisServerProcess> nodes = new ArrayList<>();
    private final List<Integer> clientPorts = new ArrayList<>();

    private RedisCluster() {
    }

    /** Starts {@code masters} nodes, creates the cluster and waits until every node reports cluster_state:ok. */
    public static RedisCluster start(int masters) {
        return start(masters, 0, null, 5000);
    }

    /**
     * Starts {@code masters * (1 + replicasPerMaster)} nodes and creates the cluster (the first {@code masters}
     * nodes become the masters), then waits until every node reports cluster_state:ok and every replica has caught
     * up with its master.
     *
     * @param tls certificates for TLS ports, TLS on the cluster bus and TLS replication; null for plain TCP
     * @param nodeTimeoutMillis {@code cluster-node-timeout}: how long until a silent master is failed over
     */
    public static RedisCluster start(int masters, int replicasPerMaster, TestCertificates tls,
                                     long nodeTimeoutMillis) {
        RedisServerProcess.findBinary();
        RedisCluster c = new RedisCluster();
        try {
            List<String> create = new ArrayList<>(List.of("redis-cli"));
            if (tls != null) {
                create.addAll(List.of("--tls", "--cacert", tls.caPem().toString()));
            }
            create.addAll(List.of("--cluster", "create"));
            for (int i = 0; i < masters * (1 + replicasPerMaster); i++) {
                int clusterPort = clusterPort();
                List<String> args = new ArrayList<>(List.of("--cluster-enabled", "yes", "--cluster-config-file",
                        "nodes-" + clusterPort + ".conf", "--cluster-node-timeout", Long.toString(nodeTimeoutMillis)));
                if (tls != null) {
                    args.addAll(tls.serverArgs(clusterPort, false));
                    args.addAll(List.of("--tls-cluster", "yes", "--tls-replication", "yes"));
                }
                int plainPort = tls == null ? clusterPort : RedisServerProcess.freePort();
                c.nodes.add(RedisServerProcess.startOnPort(plainPort, args.toArray(String[]::new)));
                c.clientPorts.add(clusterPort);
                create.add("127.0.0.1:" + clusterPort);
            }
            create.addAll(List.of("--cluster-replicas", Integer.toString(replicasPerMaster), "--cluster-yes"));
            String out = run(create);
            if (!out.contains("All 16384 slots covered")) {
                throw new IllegalStateException("redis-cli --cluster create failed: " + out);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            for (RedisServerProcess n : c.nodes) {
                while (!cli(n, "cluster", "info").contains("cluster_state:ok")) {
                    await(deadline, "the cluster did not become ok in 30 s");
                }
            }
            if (replicasPerMaster > 0) {
                for (int m = 0; m < masters; m++) {
                    while (!c.replicasCaughtUp(c.nodes.get(m), replicasPerMaster)) {
                        await(deadline, "the replicas of " + c.nodes.get(m).hostPort() + " did not sync in 30 s");
                    }
                }
            }
            return c;
        } catch (IOException | InterruptedException | RuntimeException e) {
            c.close();
            throw new IllegalStateException("cannot start a cluster of " + masters + " masters", e);
        }
    }

    private static void await(long deadlineNanos, String failure) throws InterruptedException {
        if (System.nanoTime() > deadlineNanos) {
            throw new IllegalStateException(failure);
        }
        Thread.sleep(100);
    }

    /** Whether {@code master} has {@code replicas} online replicas at its own replication offset. */
    public boolean replicasCaughtUp(RedisServerProcess master, int replicas) throws IOException,
            InterruptedException {
        String info = cli(master, "info", "replication");
        String offset = field(info, "master_repl_offset");
        int online = 0;
        for (String line : info.split("\r?\n")) {
            if (line.startsWith("slave") && line.contains("state=online") && line.contains("offset=" + offset + ",")) {
                online++;
            }
        }
        return online >= replicas;
    }

    private static String field(String info, String name) {
        for (String line : info.split("\r?\n")) {
            if (line.startsWith(name + ":")) {
                return line.substring(name.length() + 1).trim();
            }
        }
        return "";
    }

    /** The nodes, in creation order. */
    public List<RedisServerProcess> nodes() {
        return nodes;
    }

    /** {@code host:port,host:port,...} of every node: the ports clients use (the TLS ports of a TLS cluster). */
    public String seeds() {
        StringBuilder b = new StringBuilder();
        for (int p : clientPorts) {
            b.append(b.isEmpty() ? "" : ",").append("127.0.0.1:").append(p);
        }
        return b.toString();
    }

    /** The port clients use for node {@code i}: its TLS port in a TLS cluster, else its only port. */
    public int clientPort(int i) {
        return clientPorts.get(i);
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
