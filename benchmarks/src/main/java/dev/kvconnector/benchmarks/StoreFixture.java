package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Starts what a store URI needs for the length of one benchmark trial, and gives the URI to open.
 *
 * <p>A benchmark's {@code store} parameter is a URI template. A placeholder in braces names a fixture that the
 * benchmark starts and replaces with the address it got:
 * <ul>
 *   <li>{@code {redis}}: a fresh {@code redis-server} on a free 127.0.0.1 port ({@link RedisServerFixture}),
 *       so {@code valkey://{redis}} measures our Valkey client against the server Lettuce and Jedis use;</li>
 *   <li>{@code {lmserver}}: the Java LMCache server on a free 127.0.0.1 port ({@link LmServerFixture}), so
 *       {@code lm://{lmserver}} measures the {@code lm://} store against it;</li>
 *   <li>{@code {mooncake-double}}: the {@code host:port?options} of the Mooncake store test double
 *       ({@link StoreCatalog#mooncakeDouble}), for schemes layered on {@code mooncake://};</li>
 *   <li>{@code {unique}}: a name no other trial uses, for stores named by path such as {@code shm:/kvc-bench-{unique}};
 *       files in {@code /dev/shm} whose name holds it are removed at close.</li>
 * </ul>
 * A URI without placeholders ({@code memory:}, or a server you started, such as {@code lm://10.0.0.5:65432}) is
 * opened as given. To cover a new backend that needs a server, add a placeholder here and a fixture class beside
 * {@link RedisServerFixture}.
 */
public interface StoreFixture extends AutoCloseable {

    /** The URI to open, placeholders replaced. */
    String uri();

    /** Stops what {@link #start} started. Idempotent. */
    @Override
    void close();

    /** Starts the fixtures that {@code template} names and returns the resolved URI. */
    static StoreFixture start(String template) {
        List<AutoCloseable> started = new ArrayList<>();
        String uri = template;
        try {
            if (uri.contains("{redis}")) {
                RedisServerFixture redis = RedisServerFixture.start();
                started.add(redis);
                uri = uri.replace("{redis}", redis.hostPort());
            }
            if (uri.contains("{lmserver}")) {
                LmServerFixture lm = LmServerFixture.start();
                started.add(lm);
                uri = uri.replace("{lmserver}", lm.hostPort());
            }
            if (uri.contains("{mooncake-double}")) {
                Path dbl = StoreCatalog.mooncakeDoublePath();
                if (!Files.exists(dbl)) {
                    throw new IllegalStateException("the Mooncake store test double " + dbl + " is missing: build the "
                            + "native module (./mvnw -pl native compile, needs cmake and gcc) and run from the "
                            + "repository root");
                }
                String mooncake = StoreCatalog.mooncakeDouble(dbl.toString());
                uri = uri.replace("{mooncake-double}", mooncake.substring("mooncake://".length()));
            }
            if (uri.contains("{unique}")) {
                String unique = ProcessHandle.current().pid() + "-" + System.nanoTime();
                uri = uri.replace("{unique}", unique);
                started.add(() -> removeShmFiles(unique));
            }
            if (uri.contains("{") && uri.indexOf('}') > uri.indexOf('{')) {
                throw new IllegalArgumentException("unknown placeholder in store URI template '" + template
                        + "'; known: {redis}, {lmserver}, {mooncake-double}, {unique}");
            }
        } catch (RuntimeException e) {
            closeAll(started);
            throw e;
        }
        String resolved = uri;
        return new StoreFixture() {
            private boolean closed;

            @Override
            public String uri() {
                return resolved;
            }

            @Override
            public void close() {
                if (!closed) {
                    closed = true;
                    closeAll(started);
                }
            }
        };
    }

    /** Removes the files a {@code shm:} store named with {@code unique} left in {@code /dev/shm}. */
    private static void removeShmFiles(String unique) throws IOException {
        Path dir = Path.of("/dev/shm");
        if (!Files.isDirectory(dir)) {
            return;
        }
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.filter(p -> p.getFileName().toString().contains(unique)).toList()) {
                Files.deleteIfExists(f);
            }
        }
    }

    private static void closeAll(List<AutoCloseable> started) {
        for (AutoCloseable c : started.reversed()) {
            try {
                c.close();
            } catch (Exception e) {
                System.err.println("fixture did not stop cleanly: " + e);
            }
        }
    }
}
