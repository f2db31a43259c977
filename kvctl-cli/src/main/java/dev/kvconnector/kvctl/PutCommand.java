package dev.kvconnector.kvctl;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/** Stores a file's bytes under a key. */
@Command(name = "put", description = "Store the bytes of a file under a key.")
final class PutCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;
    @Mixin
    StoreOption store;
    @Mixin
    KeyOption keyOption;
    @Option(names = "--in", required = true, paramLabel = "FILE")
    Path in;
    @Option(names = "--ttl-ms", defaultValue = "0", description = "Time to live in ms (0: the store's default)")
    long ttl;
    @Option(names = "--if-absent", description = "Keep an existing value")
    boolean ifAbsent;

    @Override
    public Integer call() {
        try (Arena arena = Arena.ofConfined(); KVStore s = KVStores.open(store.uri)) {
            var value = ObjectFiles.mapForRead(in, arena);
            boolean stored = s.put(keyOption.key, value, PutOptions.DEFAULT.withTtlMillis(ttl).withIfAbsent(ifAbsent));
            spec.commandLine().getOut().println(stored ? "stored " + value.byteSize() + " bytes under " + keyOption.key
                    : "kept the existing value of " + keyOption.key + " (--if-absent)");
            return 0;
        }
    }
}
