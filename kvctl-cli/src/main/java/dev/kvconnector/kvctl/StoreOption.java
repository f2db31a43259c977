package dev.kvconnector.kvctl;

import picocli.CommandLine.Option;

/** The {@code --store URI} option shared by commands. */
final class StoreOption {
    @Option(names = "--store", required = true, paramLabel = "URI",
            description = "Store URI, e.g. memory:, shm:/kv, valkey://host:6379, mooncake://master:50051")
    String uri;
}
