package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The README's compiled examples: each code block must equal a program of this module's test build after its
 * package line, and the program runs in the build, so the README cannot rot. "Inserting and drop-selecting" is
 * {@link ReadmeExample} (run here, where it must drop-select the whole request); "Your own KVStoreConnector" is
 * {@code MemoryKVStoreConnectorContractTest} (run by surefire as the contract over {@code memory:}).
 */
class ReadmeExampleTest {
    private static final String HEADING = "## Inserting and drop-selecting a request";
    private static final String CONTRACT_HEADING = "### Your own KVStoreConnector";

    @Test
    void theReadmeBlockIsTheProgramAsWritten() throws IOException {
        assertBlockIsTheSource(HEADING, "src/test/java/dev/kvconnector/connector/ReadmeExample.java");
    }

    @Test
    void theConnectorContractBlockIsTheMemoryRunAsWritten() throws IOException {
        assertBlockIsTheSource(CONTRACT_HEADING,
                "src/test/java/dev/kvconnector/store/memory/MemoryKVStoreConnectorContractTest.java");
    }

    /** The first java block under {@code heading} equals the source at {@code path} without its package line. */
    private static void assertBlockIsTheSource(String heading, String path) throws IOException {
        Path module = Path.of("").toAbsolutePath();
        String readme = Files.readString(module.resolveSibling("README.md"));
        int section = readme.indexOf(heading);
        assertTrue(section >= 0, "README.md has no section '" + heading + "'");
        int open = readme.indexOf("```java\n", section) + "```java\n".length();
        int close = readme.indexOf("```\n", open);
        String block = readme.substring(open, close);
        String program = Files.readString(module.resolve(path));
        String body = program.substring(program.indexOf('\n', program.indexOf("package ")) + 1).stripLeading();
        assertEquals(body, block, "the README's block differs from " + path + ": copy the source into the block "
                + "under '" + heading + "' (without its package line)");
    }

    @Test
    void theProgramRunsAndDropSelectsTheWholeRequest() {
        DropResult r = ReadmeExample.run();
        assertTrue(r.isComplete(), r.toString());
        assertEquals(300, r.matchedTokens());
    }
}
