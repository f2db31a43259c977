package dev.kvconnector.mooncake.p2p;

/**
 * The settings of a {@link TransferEngineConnector}, each a {@code PROP_NAME}/{@code DEFAULT} pair as in Aeron's
 * {@code Configuration}; {@link TransferEngineConnector.Builder} starts from them and validates once.
 */
public final class P2pConfiguration {
    /** System property: D's wait for P's next message, in ms, before a {@code TIMED_OUT} miss. */
    public static final String LAYER_TIMEOUT_MS_PROP_NAME = "kvc.p2p.layer.timeout.ms";
    /** Default of {@link #LAYER_TIMEOUT_MS_PROP_NAME}. */
    public static final long LAYER_TIMEOUT_MS_DEFAULT = 10_000;
    /** System property: P's wait for its writes to end, in ms. */
    public static final String TRANSFER_TIMEOUT_MS_PROP_NAME = "kvc.p2p.transfer.timeout.ms";
    /** Default of {@link #TRANSFER_TIMEOUT_MS_PROP_NAME}. */
    public static final long TRANSFER_TIMEOUT_MS_DEFAULT = 30_000;
    /** System property: bytes of registered staging (P's gathered layers, D's hidden-state landing). */
    public static final String STAGING_BYTES_PROP_NAME = "kvc.p2p.staging.bytes";
    /** Default of {@link #STAGING_BYTES_PROP_NAME}. */
    public static final long STAGING_BYTES_DEFAULT = 256L << 20;
    /** System property: the most blocks one request may span, which sizes each batch of WRITE requests. */
    public static final String MAX_BLOCKS_PROP_NAME = "kvc.p2p.max.blocks";
    /** Default of {@link #MAX_BLOCKS_PROP_NAME}. */
    public static final int MAX_BLOCKS_DEFAULT = 4096;
    /**
     * System property: the layers (or hidden states) P keeps in flight per transfer before a put waits for the
     * oldest. Two let the gather of a layer overlap the transfer of the previous one while the staging stays warm in
     * the CPU's cache; more let P's forward pass run ahead of a link slower than it, at the cost of colder staging and
     * more batches.
     */
    public static final String LAYERS_IN_FLIGHT_PROP_NAME = "kvc.p2p.layers.in.flight";
    /** Default of {@link #LAYERS_IN_FLIGHT_PROP_NAME}. */
    public static final int LAYERS_IN_FLIGHT_DEFAULT = 2;
    /** System property: where registered memory lives, {@code cpu:N}. */
    public static final String LOCATION_PROP_NAME = "kvc.p2p.location";
    /** Default of {@link #LOCATION_PROP_NAME}. */
    public static final String LOCATION_DEFAULT = "cpu:0";

    private P2pConfiguration() {
    }

    static long layerTimeoutMillis() {
        return Long.getLong(LAYER_TIMEOUT_MS_PROP_NAME, LAYER_TIMEOUT_MS_DEFAULT);
    }

    static long transferTimeoutMillis() {
        return Long.getLong(TRANSFER_TIMEOUT_MS_PROP_NAME, TRANSFER_TIMEOUT_MS_DEFAULT);
    }

    static long stagingBytes() {
        return Long.getLong(STAGING_BYTES_PROP_NAME, STAGING_BYTES_DEFAULT);
    }

    static int maxBlocks() {
        return Integer.getInteger(MAX_BLOCKS_PROP_NAME, MAX_BLOCKS_DEFAULT);
    }

    static int layersInFlight() {
        return Integer.getInteger(LAYERS_IN_FLIGHT_PROP_NAME, LAYERS_IN_FLIGHT_DEFAULT);
    }

    static String location() {
        return System.getProperty(LOCATION_PROP_NAME, LOCATION_DEFAULT);
    }
}
