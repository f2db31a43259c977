package dev.kvconnector.proxy;

/** An upstream instance failed a request: unreachable, timed out, cut the answer short or too large. */
final class UpstreamFailure extends Exception {
    private static final long serialVersionUID = 1L;

    final transient Instance instance;
    final boolean timeout;
    /** The instance could not even be connected to: it is down, not merely slow or failing one request. */
    final boolean unreachable;

    UpstreamFailure(Instance instance, String reason, boolean timeout) {
        this(instance, reason, timeout, false);
    }

    UpstreamFailure(Instance instance, String reason, boolean timeout, boolean unreachable) {
        super(instance + " (" + instance.base + "): " + reason, null, false, false);
        this.instance = instance;
        this.timeout = timeout;
        this.unreachable = unreachable;
    }
}
