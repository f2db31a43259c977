package dev.kvconnector.kvctl;

import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/** Writes a key's bytes to a file. Exit 3 on a miss. */
@Command(name = "get", description = "Write the bytes stored under a key to a file (exit 3 if absent).")
final class GetCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;
    @Mixin
    StoreOption store;
    @Mixin
    KeyOption keyOption;
    @Option(names = "--out", required = true, paramLabel = "FILE")
    Path out;

    @Override
    public Integer call() {
        try (KVStore s = KVStores.open(store.uri)) {
            for (int attempt = 0; attempt < 3; attempt++) {
                long size = s.size(keyOption.key);
                if (size < 0) {
                    return miss(s);
                }
                try (Arena arena = Arena.ofConfined()) {
                    long r = s.getInto(keyOption.key, ObjectFiles.mapForWrite(out, size, arena));
                    if (GetResult.isMiss(r)) {
                        return miss(s);
                    }
                    if (GetResult.isHit(r)) {
                        if (r != size) {
                            continue;
                        }
                        spec.commandLine().getOut().println("wrote " + r + " bytes of " + keyOption.key + " to " + out);
                        return 0;
                    }
                }
            }
            spec.commandLine().getErr().println("kvctl get: " + keyOption.key + " kept changing size while being read");
            return Kvctl.EXIT_FAILURE;
        }
    }

    private int miss(KVStore s) {
        spec.commandLine().getErr().println("miss: no key " + keyOption.key + " in " + s.uri());
        return Kvctl.EXIT_MISS;
    }
}
