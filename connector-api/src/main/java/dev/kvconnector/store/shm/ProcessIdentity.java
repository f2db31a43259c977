package dev.kvconnector.store.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Optional;

/**
 * Names a process in one {@code long} that other processes can check for liveness: the pid in the low 32 bits
 * and the low 32 bits of its start time (epoch ms) in the high 32 bits, so that a reused pid does not pass for
 * the process that died. The high half is 0 where the start time cannot be read; liveness then rests on the pid.
 *
 * <p>All processes sharing a store must share a pid namespace; the store checks this at open.
 */
final class ProcessIdentity {
    /** This process's token; never 0. */
    static final long SELF = tokenOf(ProcessHandle.current());

    private ProcessIdentity() {
    }

    static long tokenOf(ProcessHandle h) {
        return startKey(h) << 32 | (h.pid() & 0xFFFF_FFFFL);
    }

    private static long startKey(ProcessHandle h) {
        Optional<Instant> start = h.info().startInstant();
        return start.map(i -> i.toEpochMilli() & 0xFFFF_FFFFL).orElse(0L);
    }

    static long pid(long token) {
        return token & 0xFFFF_FFFFL;
    }

    /** Whether the process named by {@code token} still runs. Reads /proc: call it on slow paths only. */
    static boolean isAlive(long token) {
        if (token == SELF) {
            return true;
        }
        long pid = pid(token);
        if (pid == 0) {
            return false;
        }
        Optional<ProcessHandle> h = ProcessHandle.of(pid);
        if (h.isEmpty() || !h.get().isAlive()) {
            return false;
        }
        long expected = token >>> 32;
        long actual = startKey(h.get());
        return (expected == 0 || actual == 0 || expected == actual) && !isZombie(pid);
    }

    /**
     * Whether Linux lists the process as a zombie (dead, not yet reaped by its parent), which ProcessHandle may
     * still report as alive. A container whose init does not reap would otherwise keep a dead process's lock.
     */
    private static boolean isZombie(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
            int close = stat.lastIndexOf(')');
            char state = close >= 0 && close + 2 < stat.length() ? stat.charAt(close + 2) : '?';
            return state == 'Z' || state == 'X';
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }
}
