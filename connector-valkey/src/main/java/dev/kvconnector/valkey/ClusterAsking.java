package dev.kvconnector.valkey;

/**
 * Whether the current thread is following an ASK redirect: a node's {@link ValkeyStore} then precedes each
 * command with ASKING. A thread-local flag keeps the standalone path free of extra parameters; only cluster
 * node stores read it.
 */
final class ClusterAsking {
    private static final ThreadLocal<boolean[]> FLAG = ThreadLocal.withInitial(() -> new boolean[1]);

    private ClusterAsking() {
    }

    static boolean active() {
        return FLAG.get()[0];
    }

    static void set(boolean on) {
        FLAG.get()[0] = on;
    }
}
