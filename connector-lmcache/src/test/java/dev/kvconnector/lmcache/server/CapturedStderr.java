package dev.kvconnector.lmcache.server;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * Copies {@link System#err} into a buffer while open, so that a test can read what slf4j-simple logged (it writes
 * to whatever {@code System.err} is at the time of each message). Tests in this module run one at a time.
 */
final class CapturedStderr implements AutoCloseable {
    private final PrintStream original = System.err;
    private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();

    CapturedStderr() {
        OutputStream tee = new OutputStream() {
            @Override
            public void write(int b) {
                synchronized (buffer) {
                    buffer.write(b);
                }
                original.write(b);
            }

            @Override
            public void write(byte[] b, int off, int len) {
                synchronized (buffer) {
                    buffer.write(b, off, len);
                }
                original.write(b, off, len);
            }
        };
        System.setErr(new PrintStream(tee, true, StandardCharsets.UTF_8));
    }

    /** Everything written to standard error since this was opened. */
    String text() {
        synchronized (buffer) {
            return buffer.toString(StandardCharsets.UTF_8);
        }
    }

    @Override
    public void close() {
        System.setErr(original);
    }
}
