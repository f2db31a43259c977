package dev.kvconnector.proxy;

/** An upstream instance failed a request: unreachable, timed out, cut the answer short or too large. */
final class UpstreamFailure extends Exception {
    private static final long serialVersionUID = 1L;

    final transient Instance instance;
    final boolean timeout;

    UpstreamFailure(Instance instance, String reason, boolean timeout) {
        super(instance + " (" + instance.base + "): " + reason, null, false, false);
        this.instance = instance;
        this.timeout = timeout;
    }
}
