package dev.kvconnector.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * FFM bindings to the CUDA driver API ({@code libcuda.so.1}), the subset kvconnector needs for device-resident KV:
 * devices, the primary context, device and pinned host memory, async copies, streams, events, modules and kernel
 * launches. Versioned symbols ({@code cuMemAlloc_v2}, ...) are bound by the names {@code cuda.h} maps to.
 *
 * <p>The library is loaded on the first call to {@link #get()}, never at class initialisation of anything the CPU
 * path touches; a machine without a driver therefore pays nothing until device memory is asked for. It is searched
 * as {@code -Dkvc.cuda.library} or {@code KVC_CUDA_LIBRARY} when set, else as {@code libcuda.so.1} and
 * {@code libcuda.so} through the dynamic loader ({@code LD_LIBRARY_PATH}, the ld cache), else at the usual driver
 * paths; a miss names every place tried.
 *
 * <p>Every method returns the call's result or throws the {@link KVException} of {@link CudaResult#check}. Device
 * pointers ({@code CUdeviceptr}) are {@code long}s; streams, events, contexts, modules and functions are opaque
 * {@link MemorySegment} handles ({@link MemorySegment#NULL} is the default stream). The driver is thread safe, but a
 * context must be current on the calling thread ({@link CudaContext#makeCurrent()}).
 *
 * <p>Over 400 lines because it binds one C API: each method is a short checked wrapper of one driver function,
 * and they share the symbol lookup and the error mapping.
 */
public final class CudaDriver {
    /** System property naming the driver library's path. */
    public static final String LIBRARY_PROP = "kvc.cuda.library";
    /** Environment variable naming the driver library's path, when the property is unset. */
    public static final String LIBRARY_ENV = "KVC_CUDA_LIBRARY";

    /** {@code CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT}. */
    public static final int ATTR_SM_COUNT = 16;
    /** {@code CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE}, in kHz. */
    public static final int ATTR_MEMORY_CLOCK_KHZ = 36;
    /** {@code CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH}, in bits. */
    public static final int ATTR_MEMORY_BUS_WIDTH_BITS = 37;
    /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR}. */
    public static final int ATTR_CC_MAJOR = 75;
    /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR}. */
    public static final int ATTR_CC_MINOR = 76;
    /** {@code CU_STREAM_NON_BLOCKING}: the stream does not synchronise with the legacy default stream. */
    public static final int STREAM_NON_BLOCKING = 0x1;
    /** {@code CU_EVENT_DISABLE_TIMING}: a cheaper event for ordering only. */
    public static final int EVENT_DISABLE_TIMING = 0x2;
    /** {@code CU_MEMHOSTALLOC_PORTABLE} / {@code CU_MEMHOSTREGISTER_PORTABLE}: pinned for every context. */
    public static final int HOST_PORTABLE = 0x1;

    private static final List<String> DEFAULT_NAMES = List.of("libcuda.so.1", "libcuda.so");
    private static final List<String> DEFAULT_PATHS = List.of(
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
            "/usr/lib64/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1");

    private final String library;
    private final MethodHandle cuInit;
    private final MethodHandle cuDriverGetVersion;
    private final MethodHandle cuDeviceGetCount;
    private final MethodHandle cuDeviceGet;
    private final MethodHandle cuDeviceGetName;
    private final MethodHandle cuDeviceGetAttribute;
    private final MethodHandle cuDeviceTotalMem;
    private final MethodHandle cuDevicePrimaryCtxRetain;
    private final MethodHandle cuDevicePrimaryCtxRelease;
    private final MethodHandle cuCtxSetCurrent;
    private final MethodHandle cuMemAlloc;
    private final MethodHandle cuMemFree;
    private final MethodHandle cuMemHostAlloc;
    private final MethodHandle cuMemFreeHost;
    private final MethodHandle cuMemHostRegister;
    private final MethodHandle cuMemHostUnregister;
    private final MethodHandle cuMemcpyHtoDAsync;
    private final MethodHandle cuMemcpyDtoHAsync;
    private final MethodHandle cuMemcpyDtoDAsync;
    private final MethodHandle cuStreamCreate;
    private final MethodHandle cuStreamSynchronize;
    private final MethodHandle cuStreamDestroy;
    private final MethodHandle cuEventCreate;
    private final MethodHandle cuEventRecord;
    private final MethodHandle cuEventSynchronize;
    private final MethodHandle cuEventElapsedTime;
    private final MethodHandle cuEventDestroy;
    private final MethodHandle cuModuleLoadData;
    private final MethodHandle cuModuleUnload;
    private final MethodHandle cuModuleGetFunction;
    private final MethodHandle cuLaunchKernel;

    /** The loaded driver, or the failure that every later {@link #get()} reports again. */
    private static final class Holder {
        static final Object LOADED = load();
    }

    private CudaDriver(String library, SymbolLookup lookup) {
        this.library = library;
        cuInit = bind(lookup, FunctionDescriptor.of(JAVA_INT, JAVA_INT), "cuInit");
        cuDriverGetVersion = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuDriverGetVersion");
        cuDeviceGetCount = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuDeviceGetCount");
        cuDeviceGet = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), "cuDeviceGet");
        cuDeviceGetName = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), "cuDeviceGetName");
        cuDeviceGetAttribute = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT),
                "cuDeviceGetAttribute");
        cuDeviceTotalMem = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), "cuDeviceTotalMem_v2");
        cuDevicePrimaryCtxRetain = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT),
                "cuDevicePrimaryCtxRetain");
        cuDevicePrimaryCtxRelease = bind(lookup, FunctionDescriptor.of(JAVA_INT, JAVA_INT),
                "cuDevicePrimaryCtxRelease_v2");
        cuCtxSetCurrent = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuCtxSetCurrent");
        cuMemAlloc = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG), "cuMemAlloc_v2");
        cuMemFree = bind(lookup, FunctionDescriptor.of(JAVA_INT, JAVA_LONG), "cuMemFree_v2");
        cuMemHostAlloc = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT), "cuMemHostAlloc");
        cuMemFreeHost = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuMemFreeHost");
        cuMemHostRegister = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT),
                "cuMemHostRegister_v2");
        cuMemHostUnregister = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuMemHostUnregister");
        cuMemcpyHtoDAsync = bind(lookup, FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS),
                "cuMemcpyHtoDAsync_v2");
        cuMemcpyDtoHAsync = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS),
                "cuMemcpyDtoHAsync_v2");
        cuMemcpyDtoDAsync = bind(lookup, FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS),
                "cuMemcpyDtoDAsync_v2");
        cuStreamCreate = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), "cuStreamCreate");
        cuStreamSynchronize = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuStreamSynchronize");
        cuStreamDestroy = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuStreamDestroy_v2");
        cuEventCreate = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), "cuEventCreate");
        cuEventRecord = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), "cuEventRecord");
        cuEventSynchronize = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuEventSynchronize");
        // _v2 only exists from driver 12.8 on; the unversioned symbol has the same signature.
        cuEventElapsedTime = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS),
                "cuEventElapsedTime_v2", "cuEventElapsedTime");
        cuEventDestroy = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuEventDestroy_v2");
        cuModuleLoadData = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), "cuModuleLoadData");
        cuModuleUnload = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuModuleUnload");
        cuModuleGetFunction = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS),
                "cuModuleGetFunction");
        cuLaunchKernel = bind(lookup, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT,
                JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS), "cuLaunchKernel");
    }

    /**
     * The driver, loaded and bound on first use. Does not call {@code cuInit}: {@link #init()} does, so that a
     * machine with a driver but no GPU can still report the driver's version.
     *
     * @throws KVException {@link ErrorCode#UNSUPPORTED_MEMORY} when no driver library could be loaded (the message
     *     names every place searched), or when a needed symbol is missing (a driver too old)
     */
    public static CudaDriver get() {
        Object loaded = Holder.LOADED;
        if (loaded instanceof CudaDriver driver) {
            return driver;
        }
        throw ((LoadFailure) loaded).exception();
    }

    /** Why loading failed; each {@link #get()} throws a fresh exception from it, so stack traces show the caller. */
    private record LoadFailure(String detail, String hint, Throwable cause) {
        KVException exception() {
            return KVException.of(ErrorCode.UNSUPPORTED_MEMORY, detail).operation("load libcuda").hint(hint)
                    .cause(cause).build();
        }
    }

    /** The library path or name the driver was loaded from. */
    public String library() {
        return library;
    }

    private static Object load() {
        List<String> candidates = new ArrayList<>();
        String configured = Optional.ofNullable(System.getProperty(LIBRARY_PROP)).orElse(System.getenv(LIBRARY_ENV));
        if (configured != null && !configured.isBlank()) {
            candidates.add(configured);
        } else {
            candidates.addAll(DEFAULT_NAMES);
            candidates.addAll(DEFAULT_PATHS);
        }
        List<String> tried = new ArrayList<>();
        for (String candidate : candidates) {
            try {
                SymbolLookup lookup = lookup(candidate);
                try {
                    return new CudaDriver(candidate, lookup);
                } catch (MissingSymbol e) {
                    return new LoadFailure(candidate + " does not export " + e.getMessage(), "the NVIDIA driver is"
                            + " too old for kvconnector: install a driver for CUDA 12 or newer", null);
                }
            } catch (IllegalArgumentException notFound) {
                tried.add(candidate);
            } catch (IllegalCallerException denied) {
                return new LoadFailure("native access to " + candidate + " is denied",
                        "start the JVM with --enable-native-access=ALL-UNNAMED", denied);
            }
        }
        return new LoadFailure("no CUDA driver library (libcuda) found; searched " + String.join(", ", tried)
                + (configured != null && !configured.isBlank() ? " (from " + LIBRARY_PROP + "/" + LIBRARY_ENV + ")"
                : " through the dynamic loader and the usual driver paths"), "install the NVIDIA driver, or set -D"
                + LIBRARY_PROP + "=/path/to/libcuda.so.1; device memory needs a driver, host memory does not", null);
    }

    @SuppressWarnings("restricted")
    private static SymbolLookup lookup(String nameOrPath) {
        return SymbolLookup.libraryLookup(nameOrPath, Arena.global());
    }

    @SuppressWarnings("restricted")
    private MethodHandle bind(SymbolLookup lookup, FunctionDescriptor descriptor, String... names) {
        for (String name : names) {
            Optional<MemorySegment> symbol = lookup.find(name);
            if (symbol.isPresent()) {
                return Linker.nativeLinker().downcallHandle(symbol.get(), descriptor);
            }
        }
        throw new MissingSymbol(String.join(" or ", names));
    }

    /** A symbol the driver does not export; becomes a {@link LoadFailure}. */
    private static final class MissingSymbol extends RuntimeException {
        MissingSymbol(String names) {
            super(names, null, false, false);
        }
    }

    private static int invoke(MethodHandle handle, Object... args) {
        try {
            return (int) handle.invokeWithArguments(args);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code cuInit(0)}: initialises the driver; idempotent. */
    public void init() {
        CudaResult.check(invoke(cuInit, 0), "cuInit", "");
    }

    /** {@code cuDriverGetVersion}: the CUDA version the driver supports, as {@code 1000 * major + 10 * minor}. */
    public int driverVersion() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            CudaResult.check(invoke(cuDriverGetVersion, out), "cuDriverGetVersion", "");
            return out.get(JAVA_INT, 0);
        }
    }

    /** {@code cuDeviceGetCount}: visible devices (after {@code CUDA_VISIBLE_DEVICES}). */
    public int deviceCount() {
        return intOut(cuDeviceGetCount, "cuDeviceGetCount", "");
    }

    /** {@code cuDeviceGet}: the device handle ({@code CUdevice}) of a visible ordinal. */
    public int device(int ordinal) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            CudaResult.check(invoke(cuDeviceGet, out, ordinal), "cuDeviceGet", "for ordinal " + ordinal);
            return out.get(JAVA_INT, 0);
        }
    }

    /** {@code cuDeviceGetName}: the device's marketing name. */
    public String deviceName(int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(256);
            CudaResult.check(invoke(cuDeviceGetName, out, 256, device), "cuDeviceGetName", "for device " + device);
            return out.getString(0, StandardCharsets.UTF_8);
        }
    }

    /** {@code cuDeviceGetAttribute}: one attribute ({@code ATTR_*}) of a device. */
    public int deviceAttribute(int device, int attribute) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            CudaResult.check(invoke(cuDeviceGetAttribute, out, attribute, device), "cuDeviceGetAttribute",
                    "attribute " + attribute + " of device " + device);
            return out.get(JAVA_INT, 0);
        }
    }

    /** {@code cuDeviceTotalMem_v2}: device memory in bytes. */
    public long deviceTotalMemory(int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            CudaResult.check(invoke(cuDeviceTotalMem, out, device), "cuDeviceTotalMem_v2", "for device " + device);
            return out.get(JAVA_LONG, 0);
        }
    }

    /** {@code cuDevicePrimaryCtxRetain}: the device's primary context (shared with the engine's CUDA runtime). */
    public MemorySegment primaryContextRetain(int device) {
        return handleOut(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "for device " + device, device);
    }

    /** {@code cuDevicePrimaryCtxRelease_v2}. */
    public void primaryContextRelease(int device) {
        CudaResult.check(invoke(cuDevicePrimaryCtxRelease, device), "cuDevicePrimaryCtxRelease_v2",
                "for device " + device);
    }

    /** {@code cuCtxSetCurrent}: binds a context to the calling thread. */
    public void setCurrentContext(MemorySegment context) {
        CudaResult.check(invoke(cuCtxSetCurrent, context), "cuCtxSetCurrent", "");
    }

    /** {@code cuMemAlloc_v2}: {@code bytes} of device memory; returns the device pointer. */
    public long memAlloc(long bytes) {
        requirePositive(bytes, "cuMemAlloc_v2");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            CudaResult.check(invoke(cuMemAlloc, out, bytes), "cuMemAlloc_v2", "of " + bytes + " bytes");
            return out.get(JAVA_LONG, 0);
        }
    }

    /** {@code cuMemFree_v2}. */
    public void memFree(long devicePointer) {
        CudaResult.check(invoke(cuMemFree, devicePointer), "cuMemFree_v2",
                "of device address 0x" + Long.toHexString(devicePointer));
    }

    /**
     * {@code cuMemHostAlloc}: {@code bytes} of page-locked host memory, returned as a segment of that size that the
     * CPU may use; free it with {@link #memFreeHost}.
     */
    @SuppressWarnings("restricted")
    public MemorySegment memHostAlloc(long bytes, int flags) {
        requirePositive(bytes, "cuMemHostAlloc");
        return handleOut(cuMemHostAlloc, "cuMemHostAlloc", "of " + bytes + " bytes", bytes, flags).reinterpret(bytes);
    }

    /** {@code cuMemFreeHost}. */
    public void memFreeHost(MemorySegment pinned) {
        CudaResult.check(invoke(cuMemFreeHost, pinned), "cuMemFreeHost", "of " + pinned.byteSize() + " bytes");
    }

    /** {@code cuMemHostRegister_v2}: page-locks existing native host memory (for example a pooled segment). */
    public void memHostRegister(MemorySegment host, int flags) {
        requireNative(host, "cuMemHostRegister_v2");
        CudaResult.check(invoke(cuMemHostRegister, host, host.byteSize(), flags), "cuMemHostRegister_v2",
                "of " + host.byteSize() + " bytes at 0x" + Long.toHexString(host.address()));
    }

    /** {@code cuMemHostUnregister}. */
    public void memHostUnregister(MemorySegment host) {
        CudaResult.check(invoke(cuMemHostUnregister, host), "cuMemHostUnregister",
                "at 0x" + Long.toHexString(host.address()));
    }

    /** {@code cuMemcpyHtoDAsync_v2}: copies the whole {@code src} to {@code dst} on {@code stream}. */
    public void memcpyHtoDAsync(long dst, MemorySegment src, MemorySegment stream) {
        requireNative(src, "cuMemcpyHtoDAsync_v2");
        CudaResult.check(htoD(dst, src, stream), "cuMemcpyHtoDAsync_v2",
                src.byteSize() + " bytes to 0x" + Long.toHexString(dst));
    }

    /** {@code cuMemcpyDtoHAsync_v2}: fills the whole {@code dst} from {@code src} on {@code stream}. */
    public void memcpyDtoHAsync(MemorySegment dst, long src, MemorySegment stream) {
        requireNative(dst, "cuMemcpyDtoHAsync_v2");
        CudaResult.check(dtoH(dst, src, stream), "cuMemcpyDtoHAsync_v2",
                dst.byteSize() + " bytes from 0x" + Long.toHexString(src));
    }

    /** {@code cuMemcpyDtoDAsync_v2}: copies {@code bytes} between device pointers on {@code stream}. */
    public void memcpyDtoDAsync(long dst, long src, long bytes, MemorySegment stream) {
        CudaResult.check(dtoD(dst, src, bytes, stream), "cuMemcpyDtoDAsync_v2",
                bytes + " bytes from 0x" + Long.toHexString(src) + " to 0x" + Long.toHexString(dst));
    }

    /** {@code cuStreamCreate}; {@code flags} is 0 or {@link #STREAM_NON_BLOCKING}. */
    public MemorySegment streamCreate(int flags) {
        return handleOut(cuStreamCreate, "cuStreamCreate", "", flags);
    }

    /** {@code cuStreamSynchronize}: waits for all work on the stream. */
    public void streamSynchronize(MemorySegment stream) {
        CudaResult.check(handle1(cuStreamSynchronize, stream), "cuStreamSynchronize", "");
    }

    /** {@code cuStreamDestroy_v2}. */
    public void streamDestroy(MemorySegment stream) {
        CudaResult.check(invoke(cuStreamDestroy, stream), "cuStreamDestroy_v2", "");
    }

    /** {@code cuEventCreate}; {@code flags} is 0 (timing) or {@link #EVENT_DISABLE_TIMING}. */
    public MemorySegment eventCreate(int flags) {
        return handleOut(cuEventCreate, "cuEventCreate", "", flags);
    }

    /** {@code cuEventRecord}: the event completes when the stream's work enqueued so far is done. */
    public void eventRecord(MemorySegment event, MemorySegment stream) {
        CudaResult.check(handles2(cuEventRecord, event, stream), "cuEventRecord", "");
    }

    /** {@code cuEventSynchronize}: waits for the event. */
    public void eventSynchronize(MemorySegment event) {
        CudaResult.check(handle1(cuEventSynchronize, event), "cuEventSynchronize", "");
    }

    /** {@code cuEventElapsedTime(_v2)}: ms between two completed timing events (about 0.5 us resolution). */
    public float eventElapsedMillis(MemorySegment start, MemorySegment end) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_FLOAT);
            CudaResult.check(invoke(cuEventElapsedTime, out, start, end), "cuEventElapsedTime", "");
            return out.get(JAVA_FLOAT, 0);
        }
    }

    /** {@code cuEventDestroy_v2}. */
    public void eventDestroy(MemorySegment event) {
        CudaResult.check(invoke(cuEventDestroy, event), "cuEventDestroy_v2", "");
    }

    /** {@code cuModuleLoadData}: loads a PTX text (JIT-compiled for the current context's device). */
    public MemorySegment moduleLoadPtx(String ptx) {
        try (Arena a = Arena.ofConfined()) {
            return handleOut(cuModuleLoadData, "cuModuleLoadData", "of " + ptx.length() + " characters of PTX",
                    a.allocateFrom(ptx));
        }
    }

    /** {@code cuModuleUnload}. */
    public void moduleUnload(MemorySegment module) {
        CudaResult.check(invoke(cuModuleUnload, module), "cuModuleUnload", "");
    }

    /** {@code cuModuleGetFunction}: a kernel entry of a loaded module. */
    public MemorySegment moduleFunction(MemorySegment module, String name) {
        try (Arena a = Arena.ofConfined()) {
            return handleOut(cuModuleGetFunction, "cuModuleGetFunction", "for entry " + name, module,
                    a.allocateFrom(name));
        }
    }

    /**
     * {@code cuLaunchKernel}: enqueues {@code function} on {@code stream}. {@code params} is the {@code void**}
     * array of pointers to each argument, as the driver reads it during this call.
     */
    public void launchKernel(MemorySegment function, int gridX, int gridY, int gridZ, int blockX, int blockY,
            int blockZ, int sharedBytes, MemorySegment stream, MemorySegment params) {
        CudaResult.check(launch(function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes, stream,
                        params), "cuLaunchKernel",
                "grid (" + gridX + "," + gridY + "," + gridZ + ") block (" + blockX + "," + blockY + "," + blockZ + ")");
    }

    // The calls below sit on the per-layer path: invokeExact, no boxing, no allocation.

    private int htoD(long dst, MemorySegment src, MemorySegment stream) {
        try {
            return (int) cuMemcpyHtoDAsync.invokeExact(dst, src, src.byteSize(), stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private int dtoH(MemorySegment dst, long src, MemorySegment stream) {
        try {
            return (int) cuMemcpyDtoHAsync.invokeExact(dst, src, dst.byteSize(), stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private int dtoD(long dst, long src, long bytes, MemorySegment stream) {
        try {
            return (int) cuMemcpyDtoDAsync.invokeExact(dst, src, bytes, stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static int handle1(MethodHandle handle, MemorySegment a) {
        try {
            return (int) handle.invokeExact(a);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static int handles2(MethodHandle handle, MemorySegment a, MemorySegment b) {
        try {
            return (int) handle.invokeExact(a, b);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private int launch(MemorySegment function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
            int sharedBytes, MemorySegment stream, MemorySegment params) {
        try {
            return (int) cuLaunchKernel.invokeExact(function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes,
                    stream, params, MemorySegment.NULL);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return KVException.of(ErrorCode.INTERNAL, "CUDA driver call threw " + t).cause(t).build();
    }

    private int intOut(MethodHandle handle, String call, String what) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            CudaResult.check(invoke(handle, out), call, what);
            return out.get(JAVA_INT, 0);
        }
    }

    /** Calls a function whose first parameter is a pointer to an opaque handle, and returns the handle. */
    private MemorySegment handleOut(MethodHandle handle, String call, String what, Object... rest) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            Object[] args = new Object[rest.length + 1];
            args[0] = out;
            System.arraycopy(rest, 0, args, 1, rest.length);
            CudaResult.check(invoke(handle, args), call, what);
            return out.get(ADDRESS, 0);
        }
    }

    private static void requirePositive(long bytes, String call) {
        if (bytes <= 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, call + " needs a positive size, not " + bytes + " bytes")
                    .operation(call).build();
        }
    }

    private static void requireNative(MemorySegment segment, String call) {
        if (!segment.isNative()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, call + " needs native memory, not a heap segment of "
                    + segment.byteSize() + " bytes").operation(call).build();
        }
    }
}
