package dev.kvconnector.mooncake.te;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One Mooncake transfer engine: this process's endpoint for moving bytes between its registered memory and its
 * peers' (RDMA, NVLink or TCP in production; loopback TCP with the test double). Opened from a URI:
 *
 * <pre>{@code
 * mooncake-te://127.0.0.1?protocol=tcp&metadata=P2PHANDSHAKE&library=/path/libtransfer_engine.so
 * }</pre>
 *
 * <p>The host is the engine's {@code local_server_name}; {@code protocol} (default {@code tcp}) is the transport
 * installed; {@code metadata} (default {@code P2PHANDSHAKE}) is the metadata service; {@code library} names the
 * shared library (else {@value TransferEngineLocator#ENV_LIBRARY}, else the library path: see
 * {@link TransferEngineLocator}).
 *
 * <p>A peer writes into this engine's memory once this engine has {@linkplain #register registered} it and
 * passed the peer its {@link #segmentName()} and the memory's address, out of band. The peer then opens the segment
 * ({@link #openSegment}) and moves bytes with a {@link TransferBatch}. Every native object (the engine, its
 * registrations, opened segments, batches) is released by {@link #close()}.
 *
 * <p>Thread safety: every method may be called from any thread, except {@link #close()}, which must not overlap
 * other calls. A batch is used by one thread at a time.
 */
public final class TransferEngine implements AutoCloseable {
    /** The URI scheme. */
    public static final String SCHEME = "mooncake-te";
    /** The URI options. */
    public static final Set<String> OPTIONS = Set.of("protocol", "metadata", "library");
    /** Bytes for {@code getLocalIpAndPort}'s output: a host name (at most 253) plus {@code :port} and NUL. */
    private static final int NAME_BUFFER = 320;
    /** Bytes of the pre-allocated buffer for a notification's name and message (UTF-8, each NUL-terminated). */

    private final TransferEngineLibrary library;
    private final String uri;
    private final Arena arena;
    private final MemorySegment engine;
    private final String segmentName;
    private final Map<Long, Long> registrations = new ConcurrentHashMap<>();
    private final Map<Integer, RemoteSegment> segments = new ConcurrentHashMap<>();
    private final Set<TransferBatch> batches = ConcurrentHashMap.newKeySet();
    private final MemorySegment notifySize;
    private final MemorySegment notifyScratch;
    private final MemorySegment notifyHeader;
    private volatile boolean closed;

    private TransferEngine(TransferEngineLibrary library, String uri, Arena arena, MemorySegment engine,
                           String segmentName) {
        this.library = library;
        this.uri = uri;
        this.arena = arena;
        this.engine = engine;
        this.segmentName = segmentName;
        this.notifySize = arena.allocate(JAVA_INT);
        this.notifyScratch = NotifyText.allocate(arena);
        this.notifyHeader = NotifyText.header(notifyScratch);
    }

    /** Opens an engine from {@code uri}, finding the library through the process environment. */
    public static TransferEngine open(String uri) {
        return open(StoreUri.parse(uri), System.getenv());
    }

    /**
     * Opens an engine: loads the library, creates the engine and installs the transport.
     *
     * @param env the environment, for {@value TransferEngineLocator#ENV_LIBRARY}
     * @throws KVException {@code INVALID_URI} for a wrong scheme or option; {@code NATIVE_LIBRARY_MISSING} when
     *     the library or a symbol is missing; {@code INVALID_CONFIG} when the engine or transport cannot start
     */
    public static TransferEngine open(StoreUri uri, Map<String, String> env) {
        String masked = uri.masked();
        if (!SCHEME.equals(uri.scheme())) {
            throw KVException.of(ErrorCode.INVALID_URI, "not a transfer engine URI: scheme " + uri.scheme())
                    .store(masked).operation("open").hint("use mooncake-te://<local host>?protocol=tcp").build();
        }
        uri.requireKnownParams(OPTIONS);
        String host = uri.singleHost(0).host();
        String protocol = paramOr(uri, "protocol", "tcp");
        String metadata = paramOr(uri, "metadata", "P2PHANDSHAKE");
        TransferEngineLibrary library = TransferEngineLibrary.load(TransferEngineLocator.locate(uri.param("library"),
                env, System.getProperty("java.library.path"), masked));
        Arena arena = Arena.ofShared();
        try (Arena call = Arena.ofConfined()) {
            MemorySegment raw = library.createEngine(call.allocateFrom(metadata, StandardCharsets.UTF_8),
                    call.allocateFrom(host, StandardCharsets.UTF_8), call.allocateFrom(host, StandardCharsets.UTF_8),
                    0, false);
            if (raw.equals(MemorySegment.NULL)) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "createTransferEngine returned NULL for metadata "
                                + metadata + " on host " + host)
                        .store(masked).operation("open")
                        .hint("is the metadata service (metadata=) reachable, or P2PHANDSHAKE, and is " + host
                                + " an address of this machine? The engine's log (stderr) names the cause")
                        .build();
            }
            MemorySegment engine = tie(raw, arena, library);
            if (library.installTransport(engine, call.allocateFrom(protocol, StandardCharsets.UTF_8))
                    .equals(MemorySegment.NULL)) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "installTransport(" + protocol + ") failed")
                        .store(masked).operation("open")
                        .hint("protocol= must be one the library was built with and this host has (tcp always; rdma "
                                + "needs an RDMA NIC); the test double has only tcp")
                        .build();
            }
            MemorySegment name = call.allocate(NAME_BUFFER);
            int rc = library.getLocalIpAndPort(engine, name, NAME_BUFFER);
            if (rc != 0) {
                throw TransferEngineErrors.callFailed(masked, "getLocalIpAndPort", rc,
                        "the engine has no listening address; its log (stderr) names the cause");
            }
            return new TransferEngine(library, masked, arena, engine, name.getString(0, StandardCharsets.UTF_8));
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
    }

    /** Closing {@code arena} destroys the engine, so the handle can neither outlive it nor be destroyed twice. */
    @SuppressWarnings("restricted")
    private static MemorySegment tie(MemorySegment raw, Arena arena, TransferEngineLibrary library) {
        return raw.reinterpret(arena, library::destroyEngine);
    }

    private static String paramOr(StoreUri uri, String name, String fallback) {
        String v = uri.param(name);
        return v == null || v.isBlank() ? fallback : v;
    }

    /** This engine's segment name, which peers pass to {@link #openSegment}: {@code host:port} in P2PHANDSHAKE. */
    public String segmentName() {
        return segmentName;
    }

    /** The URI this engine was opened from, secrets masked. */
    public String uri() {
        return uri;
    }

    /** Where the library was found. */
    public TransferEngineLibrary library() {
        return library;
    }

    /**
     * Registers {@code memory} so that peers can write into it and read from it, and so that it can be a source.
     * Host memory is at {@code cpu:N} (or {@code *}); CUDA device memory for GPUDirect is at {@code cuda:N}, the
     * segment wrapping the device pointer ({@code MemorySegment.ofAddress(ptr).reinterpret(bytes)}): the location
     * is passed to the engine unchanged, and the engine (built with CUDA) reads and writes the device directly.
     *
     * @param location {@code cpu:N}, {@code cuda:N} or {@code *}
     * @throws KVException {@code UNSUPPORTED_MEMORY} for a heap segment; {@code INVALID_ARGUMENT} naming the
     *     address and length when the engine refuses (an overlap, a bad location)
     */
    public void register(MemorySegment memory, String location) {
        checkOpen();
        requireNative(memory);
        try (Arena call = Arena.ofConfined()) {
            int rc = library.registerLocalMemory(engine, memory.address(), memory.byteSize(),
                    call.allocateFrom(location, StandardCharsets.UTF_8), true);
            if (rc != 0) {
                throw TransferEngineErrors.registerFailed(uri, memory.address(), memory.byteSize(), location, rc);
            }
        }
        registrations.put(memory.address(), memory.byteSize());
    }

    /** Registers every buffer in one call ({@code registerLocalMemoryBatch}); on failure none stays registered. */
    public void registerAll(List<MemorySegment> memory, String location) {
        checkOpen();
        memory.forEach(TransferEngine::requireNative);
        try (Arena call = Arena.ofConfined()) {
            MemorySegment entries = call.allocate(TransferEngineLibrary.BUFFER_ENTRY, Math.max(1, memory.size()));
            long stride = TransferEngineLibrary.BUFFER_ENTRY.byteSize();
            for (int i = 0; i < memory.size(); i++) {
                entries.set(ADDRESS, i * stride, memory.get(i));
                entries.set(JAVA_LONG, i * stride + 8, memory.get(i).byteSize());
            }
            int rc = library.registerLocalMemoryBatch(engine, entries, memory.size(),
                    call.allocateFrom(location, StandardCharsets.UTF_8));
            if (rc != 0) {
                long first = memory.isEmpty() ? 0 : memory.getFirst().address();
                long bytes = memory.stream().mapToLong(MemorySegment::byteSize).sum();
                throw TransferEngineErrors.registerFailed(uri, first, bytes, location + " (a batch of "
                        + memory.size() + " buffers)", rc);
            }
        }
        memory.forEach(m -> registrations.put(m.address(), m.byteSize()));
    }

    /** Unregisters memory registered by {@link #register}; waits for peers' transfers into it to end. */
    public void unregister(MemorySegment memory) {
        checkOpen();
        int rc = library.unregisterLocalMemory(engine, memory.address());
        if (rc != 0) {
            throw TransferEngineErrors.unregisterFailed(uri, memory.address(), rc);
        }
        registrations.remove(memory.address());
    }

    /**
     * Opens a peer's segment by name.
     *
     * @param name the peer's {@link #segmentName()} ({@code host:port} in P2PHANDSHAKE mode)
     * @throws KVException {@code STORE_UNREACHABLE} naming {@code name} when the peer cannot be reached
     */
    public RemoteSegment openSegment(String name) {
        checkOpen();
        int id;
        try (Arena call = Arena.ofConfined()) {
            id = library.openSegment(engine, call.allocateFrom(name, StandardCharsets.UTF_8));
        }
        if (id < 0) {
            throw TransferEngineErrors.openSegmentFailed(uri, name, id);
        }
        RemoteSegment segment = new RemoteSegment(name, id);
        segments.put(id, segment);
        return segment;
    }

    /** Closes a segment opened by {@link #openSegment}; its transfers must have ended. */
    public void closeSegment(RemoteSegment segment) {
        checkOpen();
        if (segments.remove(segment.id()) != null) {
            int rc = library.closeSegment(engine, segment.id());
            if (rc != 0) {
                throw TransferEngineErrors.callFailed(uri, "closeSegment", rc, "was " + segment.name()
                        + " already closed?");
            }
        }
    }

    /**
     * A new batch for up to {@code capacity} requests. Allocate batches once and reuse them ({@link
     * TransferBatch#reset()}): each holds native memory for its requests.
     */
    public TransferBatch newBatch(int capacity) {
        checkOpen();
        if (capacity < 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a batch needs room for at least 1 request, not "
                    + capacity).store(uri).operation("allocateBatchID").build();
        }
        TransferBatch batch = new TransferBatch(this, capacity);
        batches.add(batch);
        return batch;
    }

    /**
     * Sends a notification to the peer of {@code segment} ({@code genNotifyInEngine}), after the bytes already
     * submitted to it.
     *
     * @return 0, or the engine's negative code
     */
    public int notify(RemoteSegment segment, String name, String message) {
        checkOpen();
        synchronized (notifyScratch) {
            NotifyText.write(notifyScratch, name, message);
            return library.genNotify(engine, segment.id(), notifyHeader);
        }
    }

    /** The notifications that arrived since the last call, oldest first; empty when none did. */
    public List<Notification> notifications() {
        checkOpen();
        synchronized (notifySize) {
            notifySize.set(JAVA_INT, 0, 0);
            MemorySegment array = library.getNotifs(engine, notifySize);
            int n = notifySize.get(JAVA_INT, 0);
            if (array.equals(MemorySegment.NULL)) {
                return List.of();
            }
            try {
                List<Notification> out = new ArrayList<>(n);
                MemorySegment messages = reinterpret(array, n * TransferEngineLibrary.NOTIFY_MSG.byteSize());
                for (int i = 0; i < n; i++) {
                    long at = i * TransferEngineLibrary.NOTIFY_MSG.byteSize();
                    out.add(new Notification(cString(messages.get(ADDRESS, at)),
                            cString(messages.get(ADDRESS, at + ADDRESS.byteSize()))));
                }
                return out;
            } finally {
                library.freeNotifs(array, n);
            }
        }
    }

    @SuppressWarnings("restricted")
    private static MemorySegment reinterpret(MemorySegment address, long bytes) {
        return address.reinterpret(bytes);
    }

    @SuppressWarnings("restricted")
    private static String cString(MemorySegment address) {
        return address.equals(MemorySegment.NULL) ? "" : address.reinterpret(Long.MAX_VALUE)
                .getString(0, StandardCharsets.UTF_8);
    }

    MemorySegment handle() {
        return engine;
    }

    void forget(TransferBatch batch) {
        batches.remove(batch);
    }

    void checkOpen() {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the transfer engine " + segmentName + " is closed")
                    .store(uri).build();
        }
    }

    static void requireNative(MemorySegment memory) {
        if (!memory.isNative()) {
            throw KVException.of(ErrorCode.UNSUPPORTED_MEMORY, "the transfer engine needs native memory; got a "
                    + "heap segment of " + memory.byteSize() + " bytes").hint("allocate the buffer off-heap").build();
        }
    }

    /**
     * Closes every batch (waiting for their transfers), every opened segment and registration, then destroys the
     * engine. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        KVException first = null;
        for (TransferBatch batch : List.copyOf(batches)) {
            try {
                batch.close();
            } catch (KVException e) {
                first = first == null ? e : first;
            }
        }
        closed = true;
        for (RemoteSegment segment : segments.values()) {
            library.closeSegment(engine, segment.id());
        }
        segments.clear();
        for (Long address : registrations.keySet()) {
            library.unregisterLocalMemory(engine, address);
        }
        registrations.clear();
        arena.close();
        if (first != null) {
            throw first;
        }
    }
}
