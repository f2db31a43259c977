package dev.kvconnector.kvctl;

import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.valkey.resp.ConnectionPool;
import dev.kvconnector.valkey.resp.Endpoint;
import dev.kvconnector.valkey.resp.RespConnection;
import dev.kvconnector.valkey.resp.RespSettings;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Tells a {@code kvctl bench} user when a Valkey or Redis server gives freed memory back to the kernel, which makes
 * every put under new keys fault fresh pages in (connector-valkey/README.md, "Server memory": 14x the put's cost on
 * this project's VM, 1.5x with the pages kept). It applies when {@code INFO memory} names jemalloc as
 * {@code mem_allocator} and {@code MEMORY MALLOC-STATS} shows a {@code dirty_decay_ms} other than -1 (or cannot be
 * read); the mend is {@code MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1} in the server's environment.
 */
final class ValkeyAllocatorHint {
    /** Schemes of one plain-TCP server; TLS and cluster URIs are not probed. */
    private static final Set<String> SCHEMES = Set.of("valkey", "redis");
    private static final Pattern DIRTY_DECAY = Pattern.compile("opt\\.dirty_decay_ms:\\s*(-?\\d+)");
    private static final long TIMEOUT_MS = 2_000;

    private ValkeyAllocatorHint() {
    }

    /**
     * Asks the server of {@code uri} for its allocator settings and returns the hint line, or null when it does not
     * apply or {@code uri} names no single plain-TCP Valkey or Redis server. A server that cannot be asked is
     * reported in the returned line.
     */
    static String probe(String uri) {
        StoreUri u = StoreUri.parse(uri);
        if (!SCHEMES.contains(u.scheme())) {
            return null;
        }
        StoreUri.HostPort hp = u.singleHost(6379);
        int protocol = "2".equals(u.param("protocol")) ? 2 : "3".equals(u.param("protocol")) ? 3 : 0;
        RespSettings settings = new RespSettings(u.user(), u.password(), 0, protocol, TIMEOUT_MS, TIMEOUT_MS, 1,
                1 << 20, 1 << 10, 64 << 10, null, true);
        Endpoint endpoint = new Endpoint(hp.host(), hp.port(), u.masked());
        try (ConnectionPool pool = new ConnectionPool(endpoint, settings)) {
            RespConnection c = pool.borrow("INFO", null);
            boolean clean = false;
            try {
                c.writer().array(2).bulk("INFO").bulk("memory").array(2).bulk("MEMORY").bulk("MALLOC-STATS").flush();
                String info = c.reader().readText();
                String stats = c.reader().readText();
                clean = true;
                return hint(endpoint.hostPort(), info, stats);
            } finally {
                pool.release(c, clean);
            }
        } catch (KVException e) {
            return "note: could not read the allocator settings of " + endpoint.hostPort() + " (" + e.getMessage()
                    + "); if its layers are far above the floor, see connector-valkey/README.md, \"Server memory\"";
        }
    }

    /**
     * The hint for a server whose {@code INFO memory} text is {@code info} and whose {@code MEMORY MALLOC-STATS}
     * text is {@code mallocStats} (either null when refused), or null when the hint does not apply.
     */
    static String hint(String hostPort, String info, String mallocStats) {
        String allocator = info == null ? null : field(info, "mem_allocator");
        if (allocator == null || !allocator.startsWith("jemalloc")) {
            return null;
        }
        Matcher m = mallocStats == null ? null : DIRTY_DECAY.matcher(mallocStats);
        String decay;
        if (m != null && m.find()) {
            if (m.group(1).equals("-1")) {
                return null;
            }
            decay = "dirty_decay_ms " + m.group(1);
        } else {
            decay = "a dirty_decay_ms that MEMORY MALLOC-STATS did not show";
        }
        return "hint: " + hostPort + " runs " + allocator + " with " + decay + ", so it returns freed pages to the "
                + "kernel and puts under new keys fault them in again (see connector-valkey/README.md, \"Server "
                + "memory\"); start it with MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 to keep them";
    }

    private static String field(String info, String name) {
        for (String line : info.split("\r?\n")) {
            if (line.startsWith(name + ":")) {
                return line.substring(name.length() + 1).trim();
            }
        }
        return null;
    }
}
