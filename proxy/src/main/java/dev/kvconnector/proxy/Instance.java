package dev.kvconnector.proxy;

import java.net.URI;
import java.util.concurrent.atomic.AtomicInteger;

/** One upstream inference instance in one role, with its health and load as this proxy sees them. */
final class Instance {
    final Role role;
    final HostPort address;
    final String name;
    final URI base;
    /** Requests this proxy has in flight on the instance. */
    final AtomicInteger outstanding = new AtomicInteger();
    /** 64-bit hash of the name, the instance's seed in rendezvous hashing. */
    final long seed;
    /** This instance's metric series, cached by {@link ProxyMetrics#of(Instance)}. */
    volatile ProxyMetrics.InstanceStats stats;
    private volatile boolean healthy = true;
    private int failedProbes;
    private int goodProbes;

    Instance(Role role, HostPort address) {
        this.role = role;
        this.address = address;
        this.name = address.toString();
        this.base = address.baseUri();
        this.seed = Hashing.mix(Hashing.fnv1a(name));
    }

    boolean healthy() {
        return healthy;
    }

    /**
     * Records a probe result; returns true when it changed the health state. Called by one health thread.
     */
    synchronized boolean recordProbe(boolean ok, int ejectAfter, int readmitAfter) {
        if (ok) {
            failedProbes = 0;
            goodProbes++;
            if (!healthy && goodProbes >= readmitAfter) {
                healthy = true;
                return true;
            }
        } else {
            goodProbes = 0;
            failedProbes++;
            if (healthy && failedProbes >= ejectAfter) {
                healthy = false;
                return true;
            }
        }
        return false;
    }

    /**
     * Ejects the instance at once, without waiting for probes; returns true when it was healthy. Only used
     * while health probing runs, since only a probe readmits.
     */
    synchronized boolean eject() {
        goodProbes = 0;
        boolean was = healthy;
        healthy = false;
        return was;
    }

    URI uri(String path) {
        return base.resolve(path);
    }

    @Override
    public String toString() {
        return role.label() + " " + name;
    }
}
