package dev.kvconnector.kvctl;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * Writes a key's bytes to a file. Exit 3 on a miss. The value goes into a temporary file beside the target, renamed
 * over it only once every byte arrived; the size the store announces is checked against {@code --max-bytes} and the
 * free space of the target's file system before any file is created. A failed get leaves an existing file untouched.
 */
@Command(name = "get", description = "Write the bytes stored under a key to a file (exit 3 if absent).")
final class GetCommand implements Callable<Integer> {
    /** Attempts when the value changes size between the size query and the read. */
    private static final int ATTEMPTS = 3;

    @Spec
    CommandSpec spec;
    @Mixin
    StoreOption store;
    @Mixin
    KeyOption keyOption;
    @Option(names = "--out", required = true, paramLabel = "FILE")
    Path out;
    @Option(names = "--max-bytes", defaultValue = "4GiB", paramLabel = "SIZE", converter = SizeConverter.class,
            description = "Refuse a value larger than this (default ${DEFAULT-VALUE}; KiB, MiB, GiB, TiB or bytes)")
    long maxBytes;

    @Override
    public Integer call() throws IOException {
        Path dir = AtomicFile.directoryOf(out);
        if (!Files.isDirectory(dir)) {
            throw failure(ErrorCode.INVALID_ARGUMENT, "the directory " + dir + " of --out " + out + " does not exist",
                    null);
        }
        if (Files.isDirectory(out)) {
            throw failure(ErrorCode.INVALID_ARGUMENT, "--out " + out + " is a directory; name a file", null);
        }
        String key = keyOption.key;
        try (KVStore s = KVStores.open(store.uri)) {
            for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
                long size = s.size(key);
                if (size < 0) {
                    return miss(s);
                }
                if (size > maxBytes) {
                    throw failure(ErrorCode.VALUE_TOO_LARGE, s.uri() + " announces " + size + " bytes for " + key
                            + ", over --max-bytes " + maxBytes + "; nothing was written",
                            "pass a larger --max-bytes if the value is that big");
                }
                long free = Files.getFileStore(dir).getUsableSpace();
                if (size > free) {
                    throw failure(ErrorCode.IO_ERROR, key + " is " + size + " bytes but " + dir + " has " + free
                            + " bytes free; nothing was written", "free space there, or write elsewhere with --out");
                }
                long[] result = new long[1];
                boolean written = write(tmp -> {
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment dst = ObjectFiles.mapForWrite(tmp, size, arena);
                        result[0] = s.getInto(key, dst);
                        if (result[0] != size) {
                            return false;
                        }
                        if (size > 0) {
                            dst.force();
                        }
                        return true;
                    }
                });
                if (written) {
                    spec.commandLine().getOut().println("wrote " + size + " bytes of " + key + " to " + out);
                    return 0;
                }
                if (GetResult.isMiss(result[0])) {
                    return miss(s);
                }
            }
            throw failure(ErrorCode.IO_ERROR, key + " in " + s.uri() + " changed size between the size query and the "
                    + "read " + ATTEMPTS + " times; nothing was written",
                    "another client is rewriting it; retry when it is done");
        }
    }

    private static KVException failure(ErrorCode code, String detail, String hint) {
        var b = KVException.of(code, detail);
        return (hint == null ? b : b.hint(hint)).build();
    }

    /** {@link AtomicFile#write} into {@code --out}, with a file system error turned into one that names the file. */
    private boolean write(AtomicFile.Writer writer) {
        try {
            return AtomicFile.write(out, writer);
        } catch (IOException e) {
            throw failure(ErrorCode.IO_ERROR, "cannot write " + out + ": " + ObjectFiles.reason(e), null);
        }
    }

    private int miss(KVStore s) {
        spec.commandLine().getErr().println("miss: no key " + keyOption.key + " in " + s.uri());
        return Kvctl.EXIT_MISS;
    }
}
