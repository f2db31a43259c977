package dev.kvconnector.proxy;

/** The role an upstream inference instance plays in disaggregated serving. */
public enum Role {
    /** Runs the prompt and publishes its KV cache ({@code kv_producer}). */
    PREFILL("prefill"),
    /** Loads the published KV cache and generates the answer ({@code kv_consumer}). */
    DECODE("decode");

    private final String label;

    Role(String label) {
        this.label = label;
    }

    /** The lower-case name used in the admin API, {@code /status} and metric labels. */
    public String label() {
        return label;
    }

    /** Parses {@code prefill} or {@code decode} (case-insensitive); null when it is neither. */
    public static Role parse(String text) {
        if (text == null) {
            return null;
        }
        for (Role r : values()) {
            if (r.label.equalsIgnoreCase(text)) {
                return r;
            }
        }
        return null;
    }
}
