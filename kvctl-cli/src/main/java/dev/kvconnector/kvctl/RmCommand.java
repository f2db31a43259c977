package dev.kvconnector.kvctl;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/** Removes a key; exit 3 when it did not exist. */
@Command(name = "rm", description = "Remove a key (exit 3 if absent).")
final class RmCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;
    @Mixin
    StoreOption store;
    @Mixin
    KeyOption keyOption;

    @Override
    public Integer call() {
        try (KVStore s = KVStores.open(store.uri)) {
            if (!s.remove(keyOption.key)) {
                spec.commandLine().getErr().println("miss: no key " + keyOption.key + " in " + s.uri());
                return Kvctl.EXIT_MISS;
            }
            spec.commandLine().getOut().println("removed " + keyOption.key);
            return 0;
        }
    }
}
