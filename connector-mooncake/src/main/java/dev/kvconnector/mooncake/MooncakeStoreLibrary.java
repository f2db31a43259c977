package dev.kvconnector.mooncake;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * FFM bindings to the 19 functions of Mooncake Store's C ABI ({@code store_c.h}), for one loaded
 * {@code libmooncake_store.so} (or its test double). The library's path is only known at run time, so the method
 * handles are final fields of an instance that {@link #load} creates once per library and caches.
 *
 * <p>The methods mirror the C functions one to one and return their raw results (0, a byte count, or a negative
 * Mooncake code: see {@link MooncakeStatus}). Strings are copied into a confined arena for the duration of each
 * call, as the ABI copies them too. Buffers are passed as segments with an explicit size in bytes, which is checked
 * against the segment's bounds before the address goes to native code. Heap segments are rejected: the ABI needs
 * native memory.
 *
 * <p>Thread safety: the native client is internally synchronised, so every method may be called from any thread,
 * except {@link #destroy}, which must not overlap other calls on the same handle.
 *
 * <p>Over 400 lines because it binds the 19 functions of one C ABI, each with the conversion of its status codes
 * into named errors.
 */
public final class MooncakeStoreLibrary {
    /** {@code size_t} as the platform's C ABI defines it. */
    static final ValueLayout C_SIZE_T = (ValueLayout) Linker.nativeLinker().canonicalLayouts().get("size_t");

    /**
     * {@code mooncake_replicate_config_t}: {@code {size_t replica_num; int with_soft_pin; int with_hard_pin;
     * const char **preferred_segments; size_t preferred_segments_count;}}.
     */
    public static final StructLayout REPLICATE_CONFIG = MemoryLayout.structLayout(
            C_SIZE_T.withName("replica_num"),
            JAVA_INT.withName("with_soft_pin"),
            JAVA_INT.withName("with_hard_pin"),
            ADDRESS.withName("preferred_segments"),
            C_SIZE_T.withName("preferred_segments_count"));

    private static final VarHandle RC_REPLICA_NUM = field("replica_num");
    private static final VarHandle RC_SOFT_PIN = field("with_soft_pin");
    private static final VarHandle RC_HARD_PIN = field("with_hard_pin");
    private static final VarHandle RC_PREFERRED = field("preferred_segments");
    private static final VarHandle RC_PREFERRED_COUNT = field("preferred_segments_count");

    /** Bytes for {@code get_hostname}'s output: a host name (at most 253) plus {@code :port} and NUL. */
    private static final int HOSTNAME_BUFFER = 320;

    private static final ConcurrentHashMap<String, MooncakeStoreLibrary> LOADED = new ConcurrentHashMap<>();

    private final MooncakeLibraryLocation location;
    private final MethodHandle create;
    private final MethodHandle destroy;
    private final MethodHandle setup;
    private final MethodHandle initAll;
    private final MethodHandle healthCheck;
    private final MethodHandle put;
    private final MethodHandle putFrom;
    private final MethodHandle batchPutFrom;
    private final MethodHandle getInto;
    private final MethodHandle batchGetInto;
    private final MethodHandle isExist;
    private final MethodHandle batchIsExist;
    private final MethodHandle getSize;
    private final MethodHandle getHostname;
    private final MethodHandle remove;
    private final MethodHandle removeByRegex;
    private final MethodHandle removeAll;
    private final MethodHandle registerBuffer;
    private final MethodHandle unregisterBuffer;

    /**
     * Per-key replication of a put.
     *
     * @param replicas copies to keep, at least 1 (the store rejects 0 with -600)
     * @param softPin evict last
     * @param hardPin never evict
     * @param preferredSegments segments (their owners' {@code host:port}) to place replicas on, best effort
     */
    public record Replication(long replicas, boolean softPin, boolean hardPin, List<String> preferredSegments) {
        /** Copies the list. */
        public Replication {
            preferredSegments = List.copyOf(preferredSegments);
        }
    }

    private MooncakeStoreLibrary(MooncakeLibraryLocation location, SymbolLookup lookup) {
        if (C_SIZE_T.carrier() != long.class) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "size_t is not 64 bits on this platform")
                    .hint("kvconnector's Mooncake binding supports 64-bit platforms only").build();
        }
        this.location = location;
        create = bind(lookup, "mooncake_store_create", FunctionDescriptor.of(ADDRESS));
        destroy = bind(lookup, "mooncake_store_destroy", FunctionDescriptor.ofVoid(ADDRESS));
        setup = bind(lookup, "mooncake_store_setup", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS,
                JAVA_LONG, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS));
        initAll = bind(lookup, "mooncake_store_init_all",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG));
        healthCheck = bind(lookup, "mooncake_store_health_check", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        put = bind(lookup, "mooncake_store_put",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, C_SIZE_T, ADDRESS));
        putFrom = bind(lookup, "mooncake_store_put_from",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, C_SIZE_T, ADDRESS));
        batchPutFrom = bind(lookup, "mooncake_store_batch_put_from",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, C_SIZE_T, ADDRESS, ADDRESS));
        getInto = bind(lookup, "mooncake_store_get_into",
                FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, C_SIZE_T));
        batchGetInto = bind(lookup, "mooncake_store_batch_get_into",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, C_SIZE_T, ADDRESS));
        isExist = bind(lookup, "mooncake_store_is_exist", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        batchIsExist = bind(lookup, "mooncake_store_batch_is_exist",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, C_SIZE_T, ADDRESS));
        getSize = bind(lookup, "mooncake_store_get_size", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS));
        getHostname = bind(lookup, "mooncake_store_get_hostname",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, C_SIZE_T));
        remove = bind(lookup, "mooncake_store_remove", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
        removeByRegex = bind(lookup, "mooncake_store_remove_by_regex",
                FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_INT));
        removeAll = bind(lookup, "mooncake_store_remove_all", FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_INT));
        registerBuffer = bind(lookup, "mooncake_store_register_buffer",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, C_SIZE_T));
        unregisterBuffer = bind(lookup, "mooncake_store_unregister_buffer",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    }

    /**
     * The binding for the library at {@code location}, loaded and bound on first use and cached afterwards.
     *
     * @throws KVException {@code NATIVE_LIBRARY_MISSING} when the library cannot be loaded or lacks a symbol;
     *     {@code INVALID_CONFIG} when the JVM denies native access
     */
    public static MooncakeStoreLibrary load(MooncakeLibraryLocation location) {
        return LOADED.computeIfAbsent(location.cacheKey(), k -> new MooncakeStoreLibrary(location, open(location)));
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
                            + "jsoncpp, yaml-cpp, curl, numa, ibverbs, uring, zstd, xxhash) installed? 'ldd' on the "
                            + "file lists what is missing. " + MooncakeLibraryLocator.BUILD_HINT)
                    .build();
        }
    }

    @SuppressWarnings("restricted")
    private MethodHandle bind(SymbolLookup lookup, String name, FunctionDescriptor descriptor) {
        MemorySegment symbol = lookup.find(name).orElseThrow(() -> KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING,
                        location + " does not export " + name)
                .operation("open")
                .hint("is it Mooncake's libmooncake_store.so built with -DWITH_STORE_C_SHARED=ON, of a version whose "
                        + "store_c.h declares all 19 mooncake_store_* functions? 'nm -D' on the file lists them")
                .build());
        try {
            return Linker.nativeLinker().downcallHandle(symbol, descriptor);
        } catch (IllegalCallerException denied) {
            throw nativeAccessDenied(denied);
        }
    }

    static KVException nativeAccessDenied(IllegalCallerException denied) {
        return NativeLibrarySearch.nativeAccessDenied(denied);
    }

    private static VarHandle field(String name) {
        return REPLICATE_CONFIG.varHandle(MemoryLayout.PathElement.groupElement(name));
    }

    /** {@code mooncake_store_create()}: a new handle, or {@link MemorySegment#NULL}. */
    public MemorySegment create() {
        try {
            return (MemorySegment) create.invokeExact();
        } catch (Throwable t) {
            throw rethrow("create", t);
        }
    }

    /**
     * {@code mooncake_store_create()} with the handle tied to {@code owner}: closing the arena destroys the client,
     * so it can neither outlive its owner nor be destroyed twice.
     *
     * @return the handle, or {@link MemorySegment#NULL} when create fails
     */
    @SuppressWarnings("restricted")
    public MemorySegment createOwnedBy(Arena owner) {
        MemorySegment raw = create();
        return raw.equals(MemorySegment.NULL) ? raw : raw.reinterpret(owner, this::destroy);
    }

    /** {@code mooncake_store_destroy(s)}: tears the client down and unmounts its segment; accepts NULL. */
    public void destroy(MemorySegment store) {
        try {
            destroy.invokeExact(store);
        } catch (Throwable t) {
            throw rethrow("destroy", t);
        }
    }

    /**
     * {@code mooncake_store_setup}; null strings are passed as NULL.
     *
     * @param globalSegmentBytes memory this client lends to the pool, in bytes (0: a pure client)
     * @param localBufferBytes the staging buffer of {@link #put}, in bytes (0: put cannot be used)
     * @return 0 or a negative Mooncake code
     */
    public int setup(MemorySegment store, String localHostname, String metadataServer, long globalSegmentBytes,
                     long localBufferBytes, String protocol, String deviceName, String masterServerAddress) {
        try (Arena call = Arena.ofConfined()) {
            return (int) setup.invokeExact(store, cString(call, localHostname), cString(call, metadataServer),
                    globalSegmentBytes, localBufferBytes, cString(call, protocol), cString(call, deviceName),
                    cString(call, masterServerAddress));
        } catch (Throwable t) {
            throw rethrow("setup", t);
        }
    }

    /** {@code mooncake_store_init_all}: hard-codes an etcd address upstream; bound for completeness, do not use. */
    public int initAll(MemorySegment store, String protocol, String deviceName, long mountSegmentBytes) {
        try (Arena call = Arena.ofConfined()) {
            return (int) initAll.invokeExact(store, cString(call, protocol), cString(call, deviceName),
                    mountSegmentBytes);
        } catch (Throwable t) {
            throw rethrow("init_all", t);
        }
    }

    /** {@code mooncake_store_health_check}: 0 healthy, 1 not set up, 2 master unreachable, -1 NULL. */
    public int healthCheck(MemorySegment store) {
        try {
            return (int) healthCheck.invokeExact(store);
        } catch (Throwable t) {
            throw rethrow("health_check", t);
        }
    }

    /** {@code mooncake_store_put}: copies {@code bytes} of {@code value} through the client's local buffer. */
    public int put(MemorySegment store, String key, MemorySegment value, long bytes, Replication replication) {
        checkBuffer(value, bytes);
        try (Arena call = Arena.ofConfined()) {
            return (int) put.invokeExact(store, cString(call, key), value, bytes, config(call, replication));
        } catch (Throwable t) {
            throw rethrow("put", t);
        }
    }

    /** {@code mooncake_store_put_from}: zero copy from a registered buffer; 0 bytes store nothing and return 0. */
    public int putFrom(MemorySegment store, String key, MemorySegment buffer, long bytes, Replication replication) {
        checkBuffer(buffer, bytes);
        try (Arena call = Arena.ofConfined()) {
            return (int) putFrom.invokeExact(store, cString(call, key), buffer, bytes, config(call, replication));
        } catch (Throwable t) {
            throw rethrow("put_from", t);
        }
    }

    /**
     * {@code mooncake_store_batch_put_from} over the first {@code count} entries.
     *
     * @param results receives a code per key (0 or negative)
     * @return 0, or -1 for bad arguments
     */
    public int batchPutFrom(MemorySegment store, String[] keys, MemorySegment[] buffers, long[] bytes, int count,
                            Replication replication, int[] results) {
        Objects.checkFromIndexSize(0, count, Math.min(Math.min(keys.length, buffers.length),
                Math.min(bytes.length, results.length)));
        try (Arena call = Arena.ofConfined()) {
            MemorySegment keyArray = keyArray(call, keys, count);
            MemorySegment bufArray = call.allocate(ADDRESS, Math.max(1, count));
            MemorySegment sizeArray = call.allocate(C_SIZE_T, Math.max(1, count));
            for (int i = 0; i < count; i++) {
                checkBuffer(buffers[i], bytes[i]);
                bufArray.setAtIndex(ADDRESS, i, buffers[i]);
                sizeArray.setAtIndex(JAVA_LONG, i, bytes[i]);
            }
            MemorySegment out = call.allocate(JAVA_INT, Math.max(1, count));
            int rc = (int) batchPutFrom.invokeExact(store, keyArray, bufArray, sizeArray, (long) count,
                    config(call, replication), out);
            MemorySegment.copy(out, JAVA_INT, 0, results, 0, count);
            return rc;
        } catch (Throwable t) {
            throw rethrow("batch_put_from", t);
        }
    }

    /** {@code mooncake_store_get_into}: bytes copied (the whole object), or negative (-600: buffer too small). */
    public long getInto(MemorySegment store, String key, MemorySegment buffer, long bytes) {
        checkBuffer(buffer, bytes);
        try (Arena call = Arena.ofConfined()) {
            return (long) getInto.invokeExact(store, cString(call, key), buffer, bytes);
        } catch (Throwable t) {
            throw rethrow("get_into", t);
        }
    }

    /**
     * {@code mooncake_store_batch_get_into} over the first {@code count} entries.
     *
     * @param results receives a byte count or negative code per key
     * @return 0, or -1 for bad arguments
     */
    public int batchGetInto(MemorySegment store, String[] keys, MemorySegment[] buffers, long[] bytes, int count,
                            long[] results) {
        Objects.checkFromIndexSize(0, count, Math.min(Math.min(keys.length, buffers.length),
                Math.min(bytes.length, results.length)));
        try (Arena call = Arena.ofConfined()) {
            MemorySegment keyArray = keyArray(call, keys, count);
            MemorySegment bufArray = call.allocate(ADDRESS, Math.max(1, count));
            MemorySegment sizeArray = call.allocate(C_SIZE_T, Math.max(1, count));
            for (int i = 0; i < count; i++) {
                checkBuffer(buffers[i], bytes[i]);
                bufArray.setAtIndex(ADDRESS, i, buffers[i]);
                sizeArray.setAtIndex(JAVA_LONG, i, bytes[i]);
            }
            MemorySegment out = call.allocate(JAVA_LONG, Math.max(1, count));
            int rc = (int) batchGetInto.invokeExact(store, keyArray, bufArray, sizeArray, (long) count, out);
            MemorySegment.copy(out, JAVA_LONG, 0, results, 0, count);
            return rc;
        } catch (Throwable t) {
            throw rethrow("batch_get_into", t);
        }
    }

    /** {@code mooncake_store_is_exist}: 1, 0 or negative. Grants a read lease on the object. */
    public int isExist(MemorySegment store, String key) {
        try (Arena call = Arena.ofConfined()) {
            return (int) isExist.invokeExact(store, cString(call, key));
        } catch (Throwable t) {
            throw rethrow("is_exist", t);
        }
    }

    /** {@code mooncake_store_batch_is_exist}; {@code results} receives 1, 0 or negative per key. */
    public int batchIsExist(MemorySegment store, String[] keys, int count, int[] results) {
        Objects.checkFromIndexSize(0, count, Math.min(keys.length, results.length));
        try (Arena call = Arena.ofConfined()) {
            MemorySegment out = call.allocate(JAVA_INT, Math.max(1, count));
            int rc = (int) batchIsExist.invokeExact(store, keyArray(call, keys, count), (long) count, out);
            MemorySegment.copy(out, JAVA_INT, 0, results, 0, count);
            return rc;
        } catch (Throwable t) {
            throw rethrow("batch_is_exist", t);
        }
    }

    /** {@code mooncake_store_get_size}: the object's size in bytes, or -704. */
    public long getSize(MemorySegment store, String key) {
        try (Arena call = Arena.ofConfined()) {
            return (long) getSize.invokeExact(store, cString(call, key));
        } catch (Throwable t) {
            throw rethrow("get_size", t);
        }
    }

    /** {@code mooncake_store_get_hostname} into a caller buffer of {@code bytes}: 0, or -1 when it is too small. */
    public int getHostname(MemorySegment store, MemorySegment buffer, long bytes) {
        checkBuffer(buffer, bytes);
        try {
            return (int) getHostname.invokeExact(store, buffer, bytes);
        } catch (Throwable t) {
            throw rethrow("get_hostname", t);
        }
    }

    /** This client's {@code host:port}, or null when {@code get_hostname} fails. */
    public String hostname(MemorySegment store) {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment buf = call.allocate(HOSTNAME_BUFFER);
            return getHostname(store, buf, HOSTNAME_BUFFER) == 0 ? buf.getString(0, StandardCharsets.UTF_8) : null;
        }
    }

    /** {@code mooncake_store_remove}: 0; -704 missing; -706 leased (without force); -703 not ready. */
    public int remove(MemorySegment store, String key, boolean force) {
        try (Arena call = Arena.ofConfined()) {
            return (int) remove.invokeExact(store, cString(call, key), force ? 1 : 0);
        } catch (Throwable t) {
            throw rethrow("remove", t);
        }
    }

    /** {@code mooncake_store_remove_by_regex}: objects removed, or negative. The real store uses ECMAScript regex. */
    public long removeByRegex(MemorySegment store, String pattern, boolean force) {
        try (Arena call = Arena.ofConfined()) {
            return (long) removeByRegex.invokeExact(store, cString(call, pattern), force ? 1 : 0);
        } catch (Throwable t) {
            throw rethrow("remove_by_regex", t);
        }
    }

    /** {@code mooncake_store_remove_all}: objects removed. */
    public long removeAll(MemorySegment store, boolean force) {
        try {
            return (long) removeAll.invokeExact(store, force ? 1 : 0);
        } catch (Throwable t) {
            throw rethrow("remove_all", t);
        }
    }

    /** {@code mooncake_store_register_buffer}: 0; -1 for NULL or 0 bytes; negative on overlap. */
    public int registerBuffer(MemorySegment store, MemorySegment buffer, long bytes) {
        checkBuffer(buffer, bytes);
        try {
            return (int) registerBuffer.invokeExact(store, buffer, bytes);
        } catch (Throwable t) {
            throw rethrow("register_buffer", t);
        }
    }

    /** {@code mooncake_store_unregister_buffer}: 0 or negative. */
    public int unregisterBuffer(MemorySegment store, MemorySegment buffer) {
        try {
            return (int) unregisterBuffer.invokeExact(store, buffer);
        } catch (Throwable t) {
            throw rethrow("unregister_buffer", t);
        }
    }

    private static MemorySegment cString(Arena call, String s) {
        return s == null ? MemorySegment.NULL : call.allocateFrom(s, StandardCharsets.UTF_8);
    }

    private static MemorySegment keyArray(Arena call, String[] keys, int count) {
        MemorySegment array = call.allocate(ADDRESS, Math.max(1, count));
        for (int i = 0; i < count; i++) {
            array.setAtIndex(ADDRESS, i, cString(call, keys[i]));
        }
        return array;
    }

    private static MemorySegment config(Arena call, Replication r) {
        if (r == null) {
            return MemorySegment.NULL;
        }
        MemorySegment cfg = call.allocate(REPLICATE_CONFIG);
        RC_REPLICA_NUM.set(cfg, 0L, r.replicas());
        RC_SOFT_PIN.set(cfg, 0L, r.softPin() ? 1 : 0);
        RC_HARD_PIN.set(cfg, 0L, r.hardPin() ? 1 : 0);
        List<String> preferred = r.preferredSegments();
        if (preferred.isEmpty()) {
            RC_PREFERRED.set(cfg, 0L, MemorySegment.NULL);
        } else {
            MemorySegment names = call.allocate(ADDRESS, preferred.size());
            for (int i = 0; i < preferred.size(); i++) {
                names.setAtIndex(ADDRESS, i, cString(call, preferred.get(i)));
            }
            RC_PREFERRED.set(cfg, 0L, names);
        }
        RC_PREFERRED_COUNT.set(cfg, 0L, (long) preferred.size());
        return cfg;
    }

    /** Native code must never see an address range beyond the segment, nor a heap segment. */
    private static void checkBuffer(MemorySegment buffer, long bytes) {
        Objects.checkFromIndexSize(0, bytes, buffer.byteSize());
        if (!buffer.isNative()) {
            throw KVException.of(ErrorCode.UNSUPPORTED_MEMORY, "Mooncake needs native memory; got a heap segment of "
                    + buffer.byteSize() + " bytes").hint("allocate the buffer off-heap (an Arena)").build();
        }
    }

    private static RuntimeException rethrow(String function, Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return KVException.of(ErrorCode.INTERNAL, "mooncake_store_" + function + " failed: " + t).cause(t).build();
    }
}
