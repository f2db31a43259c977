package dev.kvconnector.mooncake.te;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.mooncake.MooncakeLibraryLocation;
import dev.kvconnector.mooncake.NativeLibrarySearch;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.ConcurrentHashMap;

/**
 * FFM bindings to the 19 functions of Mooncake's Transfer Engine C ABI ({@code transfer_engine_c.h}) that
 * kvconnector uses, for one loaded library (the real one or {@code libmooncake_te_double.so}). The library's path
 * is only known at run time, so each method handle is a final field of an instance that {@link #load} creates once
 * per library and caches: each symbol is looked up once.
 *
 * <p>The methods mirror the C functions one to one and return their raw results: the int functions give 0 or a
 * negative code, {@code submitTransfer*}, {@code getTransferStatus} and {@code freeBatchID} give 0 or a positive one
 * (see {@link TransferEngineErrors}). Callers pass C strings and structs as native segments they own, so no call
 * opens an arena. {@code enableGracefulShutdown} is deliberately not bound: it installs SIGINT and SIGTERM handlers,
 * which would take those signals from the JVM's own shutdown.
 *
 * <p>Thread safety: the native engine is internally synchronised; a batch must be used by one thread at a time.
 */
public final class TransferEngineLibrary {
    /** {@code size_t} as the platform's C ABI defines it. */
    static final ValueLayout C_SIZE_T = (ValueLayout) Linker.nativeLinker().canonicalLayouts().get("size_t");

    /**
     * {@code struct transfer_request {int opcode; void *source; int32_t target_id; (4 bytes); uint64_t
     * target_offset; uint64_t length;}}: 40 bytes. The 4 bytes after {@code target_id} are padding in 0.3.x and a
     * file id in later versions; kvconnector writes 0 there.
     */
    public static final StructLayout TRANSFER_REQUEST = MemoryLayout.structLayout(
            JAVA_INT.withName("opcode"),
            MemoryLayout.paddingLayout(4),
            ADDRESS.withName("source"),
            JAVA_INT.withName("target_id"),
            JAVA_INT.withName("reserved"),
            JAVA_LONG.withName("target_offset"),
            JAVA_LONG.withName("length"));
    /** Byte offsets of {@link #TRANSFER_REQUEST}'s fields. */
    static final long REQ_OPCODE = 0;
    static final long REQ_SOURCE = 8;
    static final long REQ_TARGET_ID = 16;
    static final long REQ_RESERVED = 20;
    static final long REQ_TARGET_OFFSET = 24;
    static final long REQ_LENGTH = 32;

    /** {@code struct transfer_status {int status; uint64_t transferred_bytes;}}: 16 bytes. */
    public static final StructLayout TRANSFER_STATUS = MemoryLayout.structLayout(
            JAVA_INT.withName("status"),
            MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("transferred_bytes"));
    static final long STATUS_STATE = 0;
    static final long STATUS_BYTES = 8;

    /** {@code notify_msg_t {char *name; char *msg;}}, passed by value. */
    public static final StructLayout NOTIFY_MSG = MemoryLayout.structLayout(
            ADDRESS.withName("name"), ADDRESS.withName("msg"));

    /** {@code buffer_entry_t {void *addr; size_t length;}}. */
    public static final StructLayout BUFFER_ENTRY = MemoryLayout.structLayout(
            ADDRESS.withName("addr"), JAVA_LONG.withName("length"));

    /** {@code OPCODE_READ}: the peer's bytes into the source buffer. */
    public static final int OPCODE_READ = 0;
    /** {@code OPCODE_WRITE}: the source buffer into the peer's memory. */
    public static final int OPCODE_WRITE = 1;
    /** {@code INVALID_BATCH}, which {@code allocateBatchID} returns on failure. */
    public static final long INVALID_BATCH = -1L;

    private static final ConcurrentHashMap<String, TransferEngineLibrary> LOADED = new ConcurrentHashMap<>();

    private final MooncakeLibraryLocation location;
    private final MethodHandle createEngine;
    private final MethodHandle destroyEngine;
    private final MethodHandle getLocalIpAndPort;
    private final MethodHandle installTransport;
    private final MethodHandle uninstallTransport;
    private final MethodHandle registerLocalMemory;
    private final MethodHandle unregisterLocalMemory;
    private final MethodHandle registerLocalMemoryBatch;
    private final MethodHandle unregisterLocalMemoryBatch;
    private final MethodHandle openSegment;
    private final MethodHandle closeSegment;
    private final MethodHandle allocateBatchId;
    private final MethodHandle freeBatchId;
    private final MethodHandle submitTransfer;
    private final MethodHandle submitTransferWithNotify;
    private final MethodHandle getTransferStatus;
    private final MethodHandle getNotifs;
    private final MethodHandle freeNotifs;
    private final MethodHandle genNotify;

    private TransferEngineLibrary(MooncakeLibraryLocation location, SymbolLookup lookup) {
        if (C_SIZE_T.carrier() != long.class) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "size_t is not 64 bits on this platform")
                    .hint("kvconnector's transfer engine binding supports 64-bit platforms only").build();
        }
        this.location = location;
        createEngine = bind(lookup, "createTransferEngine",
                FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
        destroyEngine = bind(lookup, "destroyTransferEngine", FunctionDescriptor.ofVoid(ADDRESS));
        getLocalIpAndPort = bind(lookup, "getLocalIpAndPort",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, C_SIZE_T));
        installTransport = bind(lookup, "installTransport", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        uninstallTransport = bind(lookup, "uninstallTransport", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        registerLocalMemory = bind(lookup, "registerLocalMemory",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, C_SIZE_T, ADDRESS, JAVA_INT));
        unregisterLocalMemory = bind(lookup, "unregisterLocalMemory",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        registerLocalMemoryBatch = bind(lookup, "registerLocalMemoryBatch",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, C_SIZE_T, ADDRESS));
        unregisterLocalMemoryBatch = bind(lookup, "unregisterLocalMemoryBatch",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, C_SIZE_T));
        openSegment = bind(lookup, "openSegment", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        closeSegment = bind(lookup, "closeSegment", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        allocateBatchId = bind(lookup, "allocateBatchID", FunctionDescriptor.of(JAVA_LONG, ADDRESS, C_SIZE_T));
        freeBatchId = bind(lookup, "freeBatchID", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        submitTransfer = bind(lookup, "submitTransfer",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, C_SIZE_T));
        submitTransferWithNotify = bind(lookup, "submitTransferWithNotify",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, C_SIZE_T, NOTIFY_MSG));
        // A short leaf call that never blocks: polled in a loop, so it skips the thread-state transition.
        getTransferStatus = bind(lookup, "getTransferStatus",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, C_SIZE_T, ADDRESS), Linker.Option.critical(false));
        getNotifs = bind(lookup, "getNotifsFromEngine", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
        freeNotifs = bind(lookup, "freeNotifsMsgBuf", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        genNotify = bind(lookup, "genNotifyInEngine",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, NOTIFY_MSG));
    }

    /**
     * The binding for the library at {@code location}, loaded and bound on first use and cached afterwards.
     *
     * @throws KVException {@code NATIVE_LIBRARY_MISSING} when the library cannot be loaded or lacks a symbol;
     *     {@code INVALID_CONFIG} when the JVM denies native access
     */
    public static TransferEngineLibrary load(MooncakeLibraryLocation location) {
        return LOADED.computeIfAbsent(location.cacheKey(), k -> new TransferEngineLibrary(location, open(location)));
    }

    /** Where this library was found. */
    public MooncakeLibraryLocation location() {
        return location;
    }

    @SuppressWarnings("restricted")
    private static SymbolLookup open(MooncakeLibraryLocation location) {
        try {
            // Global: a loaded library stays loaded, so its handles stay valid for the life of the JVM.
            return location.path() != null
                    ? SymbolLookup.libraryLookup(location.path(), Arena.global())
                    : SymbolLookup.libraryLookup(location.name(), Arena.global());
        } catch (IllegalCallerException denied) {
            throw nativeAccessDenied(denied);
        } catch (IllegalArgumentException failed) {
            throw KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING, "cannot load " + location + ": "
                            + failed.getMessage())
                    .operation("open").cause(failed)
                    .hint("is it a shared library for this CPU and OS, and are its own dependencies (glog, gflags, "
                            + "jsoncpp, curl, numa, ibverbs) installed? 'ldd' on the file lists what is missing. "
                            + TransferEngineLocator.BUILD_HINT)
                    .build();
        }
    }

    @SuppressWarnings("restricted")
    private MethodHandle bind(SymbolLookup lookup, String name, FunctionDescriptor descriptor,
                              Linker.Option... options) {
        MemorySegment symbol = lookup.find(name).orElseThrow(() -> KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING,
                        location + " does not export " + name)
                .operation("open")
                .hint("is it Mooncake's transfer engine built as a shared library, of a version whose "
                        + "transfer_engine_c.h declares " + name + "? 'nm -D " + location.name()
                        + " | grep -w " + name + "' shows whether it is exported")
                .build());
        try {
            return Linker.nativeLinker().downcallHandle(symbol, descriptor, options);
        } catch (IllegalCallerException denied) {
            throw nativeAccessDenied(denied);
        }
    }

    static KVException nativeAccessDenied(IllegalCallerException denied) {
        return NativeLibrarySearch.nativeAccessDenied(denied);
    }

    /** {@code createTransferEngine}: an engine handle, or {@link MemorySegment#NULL}. Strings are C strings. */
    public MemorySegment createEngine(MemorySegment metadata, MemorySegment localServerName,
                                      MemorySegment ipOrHostName, long rpcPort, boolean autoDiscover) {
        try {
            return (MemorySegment) createEngine.invokeExact(metadata, localServerName, ipOrHostName, rpcPort,
                    autoDiscover ? 1 : 0);
        } catch (Throwable t) {
            throw rethrow("createTransferEngine", t);
        }
    }

    /** {@code destroyTransferEngine}: stops the engine and frees it (about 0.75 s with the real library). */
    public void destroyEngine(MemorySegment engine) {
        try {
            destroyEngine.invokeExact(engine);
        } catch (Throwable t) {
            throw rethrow("destroyTransferEngine", t);
        }
    }

    /** {@code getLocalIpAndPort} into {@code buffer} ({@code bytes} long): 0, or negative. */
    public int getLocalIpAndPort(MemorySegment engine, MemorySegment buffer, long bytes) {
        try {
            return (int) getLocalIpAndPort.invokeExact(engine, buffer, bytes);
        } catch (Throwable t) {
            throw rethrow("getLocalIpAndPort", t);
        }
    }

    /** {@code installTransport(engine, proto, NULL)}: a transport handle, or {@link MemorySegment#NULL}. */
    public MemorySegment installTransport(MemorySegment engine, MemorySegment proto) {
        try {
            return (MemorySegment) installTransport.invokeExact(engine, proto, MemorySegment.NULL);
        } catch (Throwable t) {
            throw rethrow("installTransport", t);
        }
    }

    /** {@code uninstallTransport}: 0 or negative. */
    public int uninstallTransport(MemorySegment engine, MemorySegment proto) {
        try {
            return (int) uninstallTransport.invokeExact(engine, proto);
        } catch (Throwable t) {
            throw rethrow("uninstallTransport", t);
        }
    }

    /** {@code registerLocalMemory}: 0; -7 on an overlap; other negative codes on failure. */
    public int registerLocalMemory(MemorySegment engine, long address, long bytes, MemorySegment location,
                                   boolean remoteAccessible) {
        try {
            return (int) registerLocalMemory.invokeExact(engine, MemorySegment.ofAddress(address), bytes, location,
                    remoteAccessible ? 1 : 0);
        } catch (Throwable t) {
            throw rethrow("registerLocalMemory", t);
        }
    }

    /** {@code unregisterLocalMemory} of the registration that starts at {@code address}: 0 or negative. */
    public int unregisterLocalMemory(MemorySegment engine, long address) {
        try {
            return (int) unregisterLocalMemory.invokeExact(engine, MemorySegment.ofAddress(address));
        } catch (Throwable t) {
            throw rethrow("unregisterLocalMemory", t);
        }
    }

    /** {@code registerLocalMemoryBatch} over {@code count} {@link #BUFFER_ENTRY} structs: 0 or negative. */
    public int registerLocalMemoryBatch(MemorySegment engine, MemorySegment entries, long count,
                                        MemorySegment location) {
        try {
            return (int) registerLocalMemoryBatch.invokeExact(engine, entries, count, location);
        } catch (Throwable t) {
            throw rethrow("registerLocalMemoryBatch", t);
        }
    }

    /** {@code unregisterLocalMemoryBatch} over {@code count} addresses: 0 or negative. */
    public int unregisterLocalMemoryBatch(MemorySegment engine, MemorySegment addresses, long count) {
        try {
            return (int) unregisterLocalMemoryBatch.invokeExact(engine, addresses, count);
        } catch (Throwable t) {
            throw rethrow("unregisterLocalMemoryBatch", t);
        }
    }

    /** {@code openSegment}: a segment id (positive), or negative. */
    public int openSegment(MemorySegment engine, MemorySegment name) {
        try {
            return (int) openSegment.invokeExact(engine, name);
        } catch (Throwable t) {
            throw rethrow("openSegment", t);
        }
    }

    /** {@code closeSegment}: 0 or negative. */
    public int closeSegment(MemorySegment engine, int segmentId) {
        try {
            return (int) closeSegment.invokeExact(engine, segmentId);
        } catch (Throwable t) {
            throw rethrow("closeSegment", t);
        }
    }

    /** {@code allocateBatchID}: a batch id (a pointer), or {@link #INVALID_BATCH}. */
    public long allocateBatchId(MemorySegment engine, long batchSize) {
        try {
            return (long) allocateBatchId.invokeExact(engine, batchSize);
        } catch (Throwable t) {
            throw rethrow("allocateBatchID", t);
        }
    }

    /** {@code freeBatchID}: 0, or 4 (busy) while a task has not been polled to a terminal state. */
    public int freeBatchId(MemorySegment engine, long batchId) {
        try {
            return (int) freeBatchId.invokeExact(engine, batchId);
        } catch (Throwable t) {
            throw rethrow("freeBatchID", t);
        }
    }

    /** {@code submitTransfer} of {@code count} {@link #TRANSFER_REQUEST} structs: 0 or a positive code. */
    public int submitTransfer(MemorySegment engine, long batchId, MemorySegment requests, long count) {
        try {
            return (int) submitTransfer.invokeExact(engine, batchId, requests, count);
        } catch (Throwable t) {
            throw rethrow("submitTransfer", t);
        }
    }

    /** {@code submitTransferWithNotify}; {@code notify} is a {@link #NOTIFY_MSG}. 0 or a positive code. */
    public int submitTransferWithNotify(MemorySegment engine, long batchId, MemorySegment requests, long count,
                                        MemorySegment notify) {
        try {
            return (int) submitTransferWithNotify.invokeExact(engine, batchId, requests, count, notify);
        } catch (Throwable t) {
            throw rethrow("submitTransferWithNotify", t);
        }
    }

    /** {@code getTransferStatus} into {@code status} (a {@link #TRANSFER_STATUS}, filled only on 0). */
    public int getTransferStatus(MemorySegment engine, long batchId, long taskId, MemorySegment status) {
        try {
            return (int) getTransferStatus.invokeExact(engine, batchId, taskId, status);
        } catch (Throwable t) {
            throw rethrow("getTransferStatus", t);
        }
    }

    /** {@code getNotifsFromEngine}: an array of {@link #NOTIFY_MSG}, its length written to {@code size}. */
    public MemorySegment getNotifs(MemorySegment engine, MemorySegment size) {
        try {
            return (MemorySegment) getNotifs.invokeExact(engine, size);
        } catch (Throwable t) {
            throw rethrow("getNotifsFromEngine", t);
        }
    }

    /** {@code freeNotifsMsgBuf}: frees what {@link #getNotifs} returned. */
    public int freeNotifs(MemorySegment notifications, int size) {
        try {
            return (int) freeNotifs.invokeExact(notifications, size);
        } catch (Throwable t) {
            throw rethrow("freeNotifsMsgBuf", t);
        }
    }

    /** {@code genNotifyInEngine} to the peer of {@code segmentId}: 0 or negative. */
    public int genNotify(MemorySegment engine, long segmentId, MemorySegment notify) {
        try {
            return (int) genNotify.invokeExact(engine, segmentId, notify);
        } catch (Throwable t) {
            throw rethrow("genNotifyInEngine", t);
        }
    }

    private static RuntimeException rethrow(String function, Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return KVException.of(ErrorCode.INTERNAL, function + " failed: " + t).cause(t).build();
    }
}
