package dev.kvconnector.kvctl;

import picocli.CommandLine.Option;

/** The {@code --key K} option of the object commands. */
final class KeyOption {
    @Option(names = "--key", required = true, description = "The object's key")
    String key;
}
