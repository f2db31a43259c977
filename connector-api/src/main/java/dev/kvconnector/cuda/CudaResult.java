package dev.kvconnector.cuda;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.HashMap;
import java.util.Map;

/**
 * The CUDA driver's {@code CUresult} codes: each code's name as {@code cuda.h} spells it, the {@link ErrorCode} it
 * becomes, and, for the codes a deployment meets in practice, a hint saying what to check. Every failed driver call
 * goes through {@link #check}, so a caller always sees {@code cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2), of 1024 bytes}
 * rather than a bare number; the number travels as {@link KVException#nativeCode()}.
 *
 * <p>Mapping: codes that mean "no usable driver or GPU here" become {@link ErrorCode#UNSUPPORTED_MEMORY} (device
 * memory cannot be used on this machine); codes that only a wrong call from kvconnector can cause (an invalid value,
 * handle or context, a PTX the driver rejects) become {@link ErrorCode#INTERNAL}; everything else, device faults
 * and out-of-memory included, becomes {@link ErrorCode#STORE_ERROR} with the code attached.
 */
public final class CudaResult {
    /** {@code CUDA_SUCCESS}. */
    public static final int SUCCESS = 0;
    /** {@code CUDA_ERROR_OUT_OF_MEMORY}. */
    public static final int OUT_OF_MEMORY = 2;
    /** {@code CUDA_ERROR_NOT_INITIALIZED}: a call came before {@code cuInit}. */
    public static final int NOT_INITIALIZED = 3;
    /**
     * {@code CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER}. The driver API has no {@code INSUFFICIENT_DRIVER}: 35 is the
     * runtime API's {@code cudaErrorInsufficientDriver}, which no driver call returns.
     */
    public static final int CALL_REQUIRES_NEWER_DRIVER = 36;
    /** {@code CUDA_ERROR_NO_DEVICE}. */
    public static final int NO_DEVICE = 100;
    /** {@code CUDA_ERROR_INVALID_CONTEXT}. */
    public static final int INVALID_CONTEXT = 201;
    /** {@code CUDA_ERROR_UNSUPPORTED_PTX_VERSION}. */
    public static final int UNSUPPORTED_PTX_VERSION = 222;
    /** {@code CUDA_ERROR_UNKNOWN}. */
    public static final int UNKNOWN = 999;

    /** Written from the CUresult enum of CUDA 13.0's {@code cuda.h}: {@code code=NAME} per line. */
    private static final String NAMES = """
            0=CUDA_SUCCESS
            1=CUDA_ERROR_INVALID_VALUE
            2=CUDA_ERROR_OUT_OF_MEMORY
            3=CUDA_ERROR_NOT_INITIALIZED
            4=CUDA_ERROR_DEINITIALIZED
            5=CUDA_ERROR_PROFILER_DISABLED
            6=CUDA_ERROR_PROFILER_NOT_INITIALIZED
            7=CUDA_ERROR_PROFILER_ALREADY_STARTED
            8=CUDA_ERROR_PROFILER_ALREADY_STOPPED
            34=CUDA_ERROR_STUB_LIBRARY
            36=CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER
            46=CUDA_ERROR_DEVICE_UNAVAILABLE
            100=CUDA_ERROR_NO_DEVICE
            101=CUDA_ERROR_INVALID_DEVICE
            102=CUDA_ERROR_DEVICE_NOT_LICENSED
            200=CUDA_ERROR_INVALID_IMAGE
            201=CUDA_ERROR_INVALID_CONTEXT
            202=CUDA_ERROR_CONTEXT_ALREADY_CURRENT
            205=CUDA_ERROR_MAP_FAILED
            206=CUDA_ERROR_UNMAP_FAILED
            207=CUDA_ERROR_ARRAY_IS_MAPPED
            208=CUDA_ERROR_ALREADY_MAPPED
            209=CUDA_ERROR_NO_BINARY_FOR_GPU
            210=CUDA_ERROR_ALREADY_ACQUIRED
            211=CUDA_ERROR_NOT_MAPPED
            212=CUDA_ERROR_NOT_MAPPED_AS_ARRAY
            213=CUDA_ERROR_NOT_MAPPED_AS_POINTER
            214=CUDA_ERROR_ECC_UNCORRECTABLE
            215=CUDA_ERROR_UNSUPPORTED_LIMIT
            216=CUDA_ERROR_CONTEXT_ALREADY_IN_USE
            217=CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
            218=CUDA_ERROR_INVALID_PTX
            219=CUDA_ERROR_INVALID_GRAPHICS_CONTEXT
            220=CUDA_ERROR_NVLINK_UNCORRECTABLE
            221=CUDA_ERROR_JIT_COMPILER_NOT_FOUND
            222=CUDA_ERROR_UNSUPPORTED_PTX_VERSION
            223=CUDA_ERROR_JIT_COMPILATION_DISABLED
            224=CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY
            225=CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC
            226=CUDA_ERROR_CONTAINED
            300=CUDA_ERROR_INVALID_SOURCE
            301=CUDA_ERROR_FILE_NOT_FOUND
            302=CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND
            303=CUDA_ERROR_SHARED_OBJECT_INIT_FAILED
            304=CUDA_ERROR_OPERATING_SYSTEM
            400=CUDA_ERROR_INVALID_HANDLE
            401=CUDA_ERROR_ILLEGAL_STATE
            402=CUDA_ERROR_LOSSY_QUERY
            500=CUDA_ERROR_NOT_FOUND
            600=CUDA_ERROR_NOT_READY
            700=CUDA_ERROR_ILLEGAL_ADDRESS
            701=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
            702=CUDA_ERROR_LAUNCH_TIMEOUT
            703=CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING
            704=CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            705=CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
            708=CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE
            709=CUDA_ERROR_CONTEXT_IS_DESTROYED
            710=CUDA_ERROR_ASSERT
            711=CUDA_ERROR_TOO_MANY_PEERS
            712=CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
            713=CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
            714=CUDA_ERROR_HARDWARE_STACK_ERROR
            715=CUDA_ERROR_ILLEGAL_INSTRUCTION
            716=CUDA_ERROR_MISALIGNED_ADDRESS
            717=CUDA_ERROR_INVALID_ADDRESS_SPACE
            718=CUDA_ERROR_INVALID_PC
            719=CUDA_ERROR_LAUNCH_FAILED
            720=CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
            721=CUDA_ERROR_TENSOR_MEMORY_LEAK
            800=CUDA_ERROR_NOT_PERMITTED
            801=CUDA_ERROR_NOT_SUPPORTED
            802=CUDA_ERROR_SYSTEM_NOT_READY
            803=CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
            804=CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
            805=CUDA_ERROR_MPS_CONNECTION_FAILED
            806=CUDA_ERROR_MPS_RPC_FAILURE
            807=CUDA_ERROR_MPS_SERVER_NOT_READY
            808=CUDA_ERROR_MPS_MAX_CLIENTS_REACHED
            809=CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED
            810=CUDA_ERROR_MPS_CLIENT_TERMINATED
            811=CUDA_ERROR_CDP_NOT_SUPPORTED
            812=CUDA_ERROR_CDP_VERSION_MISMATCH
            900=CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
            901=CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
            902=CUDA_ERROR_STREAM_CAPTURE_MERGE
            903=CUDA_ERROR_STREAM_CAPTURE_UNMATCHED
            904=CUDA_ERROR_STREAM_CAPTURE_UNJOINED
            905=CUDA_ERROR_STREAM_CAPTURE_ISOLATION
            906=CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
            907=CUDA_ERROR_CAPTURED_EVENT
            908=CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
            909=CUDA_ERROR_TIMEOUT
            910=CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE
            911=CUDA_ERROR_EXTERNAL_DEVICE
            912=CUDA_ERROR_INVALID_CLUSTER_SIZE
            913=CUDA_ERROR_FUNCTION_NOT_LOADED
            914=CUDA_ERROR_INVALID_RESOURCE_TYPE
            915=CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION
            916=CUDA_ERROR_KEY_ROTATION
            999=CUDA_ERROR_UNKNOWN
            """;

    private static final Map<Integer, String> NAME_BY_CODE = parseNames();
    private static final Map<Integer, String> HINT_BY_CODE = Map.ofEntries(
            Map.entry(1, "an argument passed to the driver is invalid: a bug in kvconnector or a freed handle"),
            Map.entry(OUT_OF_MEMORY, "the GPU has no room for the allocation: lower the engine's"
                    + " gpu_memory_utilization or the staging sizes, or free cached tensors"),
            Map.entry(NOT_INITIALIZED, "cuInit was not called before this driver call: a bug in kvconnector"),
            Map.entry(4, "the driver is shutting down (JVM exit in progress)"),
            Map.entry(34, "libcuda.so is the toolkit's stub library, not the driver: put the real driver's"
                    + " libcuda.so.1 first on the library path (not .../cuda/lib64/stubs)"),
            Map.entry(CALL_REQUIRES_NEWER_DRIVER, "the installed NVIDIA driver is older than this call needs:"
                    + " upgrade the driver"),
            Map.entry(46, "the GPU is busy or unavailable (exclusive-process compute mode, or in use):"
                    + " check nvidia-smi's compute mode and other processes"),
            Map.entry(NO_DEVICE, "no GPU visible: check CUDA_VISIBLE_DEVICES and the driver (nvidia-smi)"),
            Map.entry(101, "the device ordinal does not exist: check CUDA_VISIBLE_DEVICES and the configured device"),
            Map.entry(200, "the kernel image is invalid: rebuild paged_kv.ptx (native/cuda/build-ptx.sh)"),
            Map.entry(INVALID_CONTEXT, "no CUDA context is current on this thread: call CudaContext.makeCurrent()"
                    + " on every thread that uses the device"),
            Map.entry(209, "the kernels hold no code for this GPU: rebuild paged_kv.ptx for an older virtual"
                    + " architecture"),
            Map.entry(214, "an uncorrectable ECC error: the GPU needs attention (nvidia-smi -q -d ECC)"),
            Map.entry(218, "the driver could not JIT paged_kv.ptx: rebuild it with native/cuda/build-ptx.sh"),
            Map.entry(221, "the driver's PTX JIT compiler is missing: install the full NVIDIA driver"),
            Map.entry(UNSUPPORTED_PTX_VERSION, "paged_kv.ptx was built by an nvcc newer than this driver: build it"
                    + " with the toolkit version the driver supports (nvidia-smi shows it), or upgrade the driver"),
            Map.entry(223, "PTX JIT compilation is disabled (CUDA_DISABLE_PTX_JIT): unset it"),
            Map.entry(400, "a stream, event, module or function handle is invalid or already destroyed"),
            Map.entry(500, "a kernel entry is missing from paged_kv.ptx: rebuild it with native/cuda/build-ptx.sh"),
            Map.entry(700, "a kernel or copy touched an invalid device address: a device pointer or slot is wrong;"
                    + " the context is now unusable and the process must restart"),
            Map.entry(701, "the launch asks for more threads or registers than the GPU has: a bug in the launch"
                    + " geometry"),
            Map.entry(712, "this host memory is already registered with CUDA"),
            Map.entry(713, "this host memory was never registered with CUDA"),
            Map.entry(716, "a device address is misaligned for the vector width used: a bug in the launch geometry"),
            Map.entry(719, "a kernel failed on the device; the context is now unusable and the process must restart"),
            Map.entry(800, "the operation is not permitted (for example under MPS or in a container without"
                    + " the capability)"),
            Map.entry(801, "this GPU or platform does not support the operation"),
            Map.entry(802, "the system is not ready for CUDA: check that nvidia-fabricmanager runs on NVSwitch systems"),
            Map.entry(803, "the user-space driver (libcuda) and the kernel module differ in version: reinstall the"
                    + " driver or reboot"),
            Map.entry(804, "this GPU does not support the CUDA forward-compatibility package in use"),
            Map.entry(UNKNOWN, "the driver reported an unknown error: check dmesg for Xid messages and nvidia-smi"));

    private CudaResult() {
    }

    private static Map<Integer, String> parseNames() {
        Map<Integer, String> names = new HashMap<>();
        for (String line : NAMES.strip().split("\n")) {
            int eq = line.indexOf('=');
            names.put(Integer.parseInt(line.substring(0, eq)), line.substring(eq + 1));
        }
        return Map.copyOf(names);
    }

    /** The code's name from {@code cuda.h}, or {@code CUresult <code>} for a code this table does not know. */
    public static String name(int code) {
        String name = NAME_BY_CODE.get(code);
        return name != null ? name : "CUresult " + code;
    }

    /** What to check for this code, or a pointer to the driver API documentation when there is no specific hint. */
    public static String hint(int code) {
        String hint = HINT_BY_CODE.get(code);
        return hint != null ? hint : "see " + name(code) + " in the CUDA driver API documentation (cuda.h)";
    }

    /** The {@link ErrorCode} a failed call with this code becomes (see the class comment). */
    public static ErrorCode errorCode(int code) {
        return switch (code) {
            case NO_DEVICE, CALL_REQUIRES_NEWER_DRIVER, 34, 46, UNSUPPORTED_PTX_VERSION, 221, 223, 802, 803, 804 ->
                    ErrorCode.UNSUPPORTED_MEMORY;
            case 1, NOT_INITIALIZED, 101, 200, INVALID_CONTEXT, 209, 218, 400, 500, 701, 716 -> ErrorCode.INTERNAL;
            default -> ErrorCode.STORE_ERROR;
        };
    }

    /** The exception for a failed driver call: {@code call} names the driver function, {@code what} its arguments. */
    public static KVException failure(int code, String call, String what) {
        return KVException.of(errorCode(code), name(code) + " (" + code + ")" + (what.isEmpty() ? "" : ", " + what))
                .operation(call).hint(hint(code)).nativeCode(code).build();
    }

    /** Returns when {@code code} is {@link #SUCCESS}, else throws {@link #failure}. */
    public static void check(int code, String call, String what) {
        if (code != SUCCESS) {
            throw failure(code, call, what);
        }
    }
}
