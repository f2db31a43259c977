package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.*;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * A {@code shm:} URI, validated once: the file, the sizes a new file gets, and this instance's own settings (the
 * package comment describes each option).
 *
 * @param uri the URI, masked, for messages
 * @param path the store file
 * @param wanted the layout of the sizes the URI gives or defaults
 * @param ttlMillis time to live of puts that carry none, in ms; 0 for forever
 * @param lockTimeoutMillis how long a call waits for the store lock held by a live process, in ms
 * @param evictLive true for {@code eviction=lru}, false for {@code eviction=refuse}
 * @param source the URI as given, to tell which sizes it names
 */
record ShmOptions(String uri, Path path, ShmLayout wanted, long ttlMillis, long lockTimeoutMillis, boolean evictLive,
                  StoreUri source) {
    private static final Set<String> OPTIONS =
            Set.of("capacity", "dir", "entries", "block", "ttl", "lock-timeout", "eviction", "events");
    private static final long DEFAULT_LOCK_TIMEOUT_MS = 30_000;
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._-]{1,200}");

    /**
     * Reads and checks the URI.
     *
     * @throws KVException INVALID_URI for unknown options, a host, a bad name or sizes out of range; INVALID_CONFIG
     *     for a directory that does not exist
     */
    static ShmOptions parse(StoreUri uri) {
        uri.requireKnownParams(OPTIONS).requireNoUserInfo();
        String masked = uri.masked();
        if (!uri.hosts().isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_URI, "a shm: store is on this host and takes no host name")
                    .store(masked).operation("open").hint("write shm:/NAME, such as shm:/kv").build();
        }
        String name = uri.path().startsWith("/") ? uri.path().substring(1) : uri.path();
        if (!NAME.matcher(name).matches() || name.equals(".") || name.equals("..")) {
            throw KVException.of(ErrorCode.INVALID_URI, "the store name '" + name + "' is not 1 to 200 characters of "
                    + "A-Z a-z 0-9 . _ -").store(masked).operation("open")
                    .hint("write shm:/NAME, such as shm:/kv").build();
        }
        Path dir = Path.of(uri.param("dir") == null ? ShmStore.DEFAULT_DIR : uri.param("dir"));
        long ttl = uri.durationMillisParam("ttl", 0);
        long lockTimeout = Math.max(1, uri.durationMillisParam("lock-timeout", DEFAULT_LOCK_TIMEOUT_MS));
        String eviction = uri.params().getOrDefault("eviction", "lru");
        if (!eviction.equals("lru") && !eviction.equals("refuse")) {
            throw KVException.of(ErrorCode.INVALID_URI, "eviction=" + eviction + " is neither lru nor refuse")
                    .store(masked).operation("open").build();
        }
        ShmLayout wanted = sizes(uri, masked);
        if (!Files.isDirectory(dir)) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, "directory " + dir + " does not exist").store(masked)
                    .operation("open").hint("create it, or pass dir= naming a tmpfs directory such as /dev/shm")
                    .build();
        }
        return new ShmOptions(masked, dir.resolve(name), wanted, ttl, lockTimeout, eviction.equals("lru"), uri);
    }

    private static ShmLayout sizes(StoreUri uri, String masked) {
        long capacity = uri.sizeParam("capacity", ShmStore.DEFAULT_CAPACITY);
        long block = uri.sizeParam("block", ShmStore.DEFAULT_BLOCK);
        long entries = uri.param("entries") == null
                ? Math.clamp(capacity / (64 << 10), 1024, MAX_ENTRIES) : uri.intParam("entries", 0);
        long ring = uri.sizeParam("events", DEFAULT_RING);
        ShmLayout wanted = ShmLayout.of(capacity, block, entries, ring);
        if (wanted == null) {
            throw KVException.of(ErrorCode.INVALID_URI, "sizes out of range: capacity=" + capacity + " bytes, block="
                    + block + " bytes, entries=" + entries + ", events=" + ring + " bytes").store(masked)
                    .operation("open")
                    .hint("block is a power of two from " + MIN_BLOCK + " to " + MAX_BLOCK
                            + " bytes, capacity from one block to " + MAX_CAPACITY + " bytes, entries from "
                            + MIN_ENTRIES + " to " + MAX_ENTRIES + ", events (the event ring) a power of two from "
                            + MIN_RING + " to " + MAX_RING + " bytes")
                    .build();
        }
        return wanted;
    }

    /**
     * Checks an existing file's layout against the sizes the URI names (those it leaves out are the file's).
     *
     * @throws KVException INVALID_CONFIG naming the size, both values and the fix
     */
    void checkAgainst(ShmLayout have) {
        String[] names = {"capacity", "block", "entries", "events"};
        long[] got = {have.capacity(), have.blockSize(), have.entryCount(), have.ringBytes()};
        long[] want = {wanted.capacity(), wanted.blockSize(), wanted.entryCount(), wanted.ringBytes()};
        for (int i = 0; i < names.length; i++) {
            if (source.param(names[i]) != null && got[i] != want[i]) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, path + " exists with " + names[i] + "=" + got[i]
                        + ", the URI asks for " + want[i]).store(uri).operation("open")
                        .hint("use " + names[i] + "=" + got[i] + " or leave it out, or delete " + path
                                + " if no process uses it").build();
            }
        }
    }
}
