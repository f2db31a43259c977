package dev.kvconnector.cuda;

import java.lang.foreign.MemorySegment;

/**
 * A device's primary context, retained for as long as this object is open. The primary context is the one the CUDA
 * runtime (and so PyTorch or the engine) uses, so device pointers from the engine are valid in it.
 *
 * <p>A context is current per thread: call {@link #makeCurrent()} on every thread before it uses the device.
 */
public final class CudaContext implements AutoCloseable {
    private final CudaDriver driver;
    private final int device;
    private final int ordinal;
    private final MemorySegment context;
    private boolean closed;

    private CudaContext(CudaDriver driver, int ordinal, int device, MemorySegment context) {
        this.driver = driver;
        this.ordinal = ordinal;
        this.device = device;
        this.context = context;
    }

    /**
     * Initialises the driver, retains the primary context of the visible device {@code ordinal} and makes it
     * current on the calling thread.
     */
    public static CudaContext primary(int ordinal) {
        CudaDriver driver = CudaDriver.get();
        driver.init();
        int device = driver.device(ordinal);
        MemorySegment ctx = driver.primaryContextRetain(device);
        CudaContext context = new CudaContext(driver, ordinal, device, ctx);
        context.makeCurrent();
        return context;
    }

    /** Binds this context to the calling thread. */
    public void makeCurrent() {
        driver.setCurrentContext(context);
    }

    /** The driver this context was created with. */
    public CudaDriver driver() {
        return driver;
    }

    /** The visible ordinal of the device. */
    public int ordinal() {
        return ordinal;
    }

    /** Releases the primary context retained by {@link #primary}; idempotent. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            driver.primaryContextRelease(device);
        }
    }
}
