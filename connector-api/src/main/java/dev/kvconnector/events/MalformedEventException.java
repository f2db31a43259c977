package dev.kvconnector.events;

/** A KV event message that does not decode: truncated, of a wrong type, or with a bad frame. Counted and ignored. */
public final class MalformedEventException extends Exception {
    private static final long serialVersionUID = 1L;

    /** A failure described by {@code message} (what was expected, at which offset). */
    public MalformedEventException(String message) {
        super(message, null, false, false);
    }
}
