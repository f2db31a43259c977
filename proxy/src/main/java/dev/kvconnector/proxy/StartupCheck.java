package dev.kvconnector.proxy;

/** What {@link XpydProxy#start()} does when an instance does not serve the model on {@code /v1/models}. */
public enum StartupCheck {
    /** Refuse to start, naming the instance and what it serves. */
    FAIL,
    /** Log a warning and start; the health checker ejects the instance while it is down. */
    WARN,
    /** Skip the check. */
    OFF
}
