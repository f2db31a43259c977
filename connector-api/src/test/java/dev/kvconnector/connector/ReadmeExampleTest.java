package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The README's "Inserting and drop-selecting" example is {@link ReadmeExample}, compiled by this module's test build:
 * the README's code block must equal the program's source after its package line, and the program must run and
 * drop-select the whole request. So the README cannot rot.
 */
class ReadmeExampleTest {
    private static final String HEADING = "## Inserting and drop-selecting a request";

    @Test
    void theReadmeBlockIsTheProgramAsWritten() throws IOException {
        Path module = Path.of("").toAbsolutePath();
        String readme = Files.readString(module.resolveSibling("README.md"));
        int section = readme.indexOf(HEADING);
        assertTrue(section >= 0, "README.md has no section '" + HEADING + "'");
        int open = readme.indexOf("```java\n", section) + "```java\n".length();
        int close = readme.indexOf("```\n", open);
        String block = readme.substring(open, close);
        String program = Files.readString(module.resolve(
                "src/test/java/dev/kvconnector/connector/ReadmeExample.java"));
        String body = program.substring(program.indexOf('\n', program.indexOf("package ")) + 1).stripLeading();
        assertEquals(body, block, "the README's example differs from ReadmeExample.java: copy the program into the "
                + "block under '" + HEADING + "' (without its package line)");
    }

    @Test
    void theProgramRunsAndDropSelectsTheWholeRequest() {
        DropResult r = ReadmeExample.run();
        assertTrue(r.isComplete(), r.toString());
        assertEquals(300, r.matchedTokens());
    }
}
