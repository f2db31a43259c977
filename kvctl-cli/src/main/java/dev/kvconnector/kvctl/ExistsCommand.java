package dev.kvconnector.kvctl;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/** Exit 0 and print the size when the key exists; exit 3 when it does not. */
@Command(name = "exists", description = "Print the size of a key (exit 3 if absent).")
final class ExistsCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;
    @Mixin
    StoreOption store;
    @Mixin
    KeyOption keyOption;

    @Override
    public Integer call() {
        try (KVStore s = KVStores.open(store.uri)) {
            long size = s.size(keyOption.key);
            if (size < 0) {
                spec.commandLine().getErr().println("miss: no key " + keyOption.key + " in " + s.uri());
                return Kvctl.EXIT_MISS;
            }
            spec.commandLine().getOut().println(keyOption.key + " exists: " + size + " bytes");
            return 0;
        }
    }
}
