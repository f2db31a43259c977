package dev.kvconnector.kvctl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.server.LmCacheServer;
import dev.kvconnector.memory.NativeCopy;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class KvctlTest {
    record Run(int code, String out, String err) {
    }

    static Run kvctl(String... args) {
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            int code = Kvctl.run(args);
            return new Run(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
    }

    @Test
    void missesExitWithThreeAndAOneLineMessage(@TempDir Path dir) {
        Run get = kvctl("get", "--store", "memory:", "--key", "nope", "--out", dir.resolve("o").toString());
        assertEquals(Kvctl.EXIT_MISS, get.code());
        assertTrue(get.err().startsWith("miss: no key nope in memory:"), get.err());
        assertEquals(1, get.err().strip().lines().count());
        assertEquals(Kvctl.EXIT_MISS, kvctl("exists", "--store", "memory:", "--key", "nope").code());
        assertEquals(Kvctl.EXIT_MISS, kvctl("rm", "--store", "memory:", "--key", "nope").code());
    }

    @Test
    void putReadsTheFileAndReportsItsSize(@TempDir Path dir) throws IOException {
        Path in = dir.resolve("in.bin");
        Files.write(in, new byte[] {1, 2, 3, 4, 5});
        Run put = kvctl("put", "--store", "memory:", "--key", "k", "--in", in.toString());
        assertEquals(0, put.code(), put.err());
        assertTrue(put.out().contains("stored 5 bytes under k"), put.out());
    }

    @Test
    void putThenGetAcrossInvocationsThroughAnShmStore(@TempDir Path dir) throws IOException {
        String uri = "shm:/kvctl-test-" + ProcessHandle.current().pid() + "?capacity=16MiB&dir=" + dir;
        Path in = dir.resolve("in.bin");
        byte[] data = new byte[123_457];
        new java.util.Random(2).nextBytes(data);
        Files.write(in, data);
        assertEquals(0, kvctl("put", "--store", uri, "--key", "k", "--in", in.toString()).code());
        Path out = dir.resolve("out.bin");
        Run get = kvctl("get", "--store", uri, "--key", "k", "--out", out.toString());
        assertEquals(0, get.code(), get.err());
        assertEquals(-1, Files.mismatch(in, out));
        assertEquals(0, kvctl("rm", "--store", uri, "--key", "k").code());
        assertEquals(Kvctl.EXIT_MISS, kvctl("exists", "--store", uri, "--key", "k").code());
    }

    @Test
    void aTieredStoreServesFromItsShmTierInALaterInvocationAndDoctorReportsEachTier(@TempDir Path dir)
            throws IOException {
        String uri = "tiered:[memory:?capacity=16MiB][shm:/kvctl-tiered-" + ProcessHandle.current().pid()
                + "?capacity=16MiB&dir=" + dir + "]";
        Path in = dir.resolve("in.bin");
        byte[] data = new byte[70_001];
        new java.util.Random(3).nextBytes(data);
        Files.write(in, data);
        assertEquals(0, kvctl("put", "--store", uri, "--key", "k", "--in", in.toString()).code());
        Path out = dir.resolve("out.bin");
        Run get = kvctl("get", "--store", uri, "--key", "k", "--out", out.toString());
        assertEquals(0, get.code(), get.err());
        assertEquals(-1, Files.mismatch(in, out), "the memory: tier of this invocation is new, so shm: served it");

        Run doctor = kvctl("doctor", "--store", uri);
        assertEquals(0, doctor.code(), doctor.out() + doctor.err());
        assertTrue(doctor.out().contains("tier 1 of 2: memory:") && doctor.out().contains("tier 2 of 2: shm:"),
                doctor.out());
        assertEquals(0, kvctl("rm", "--store", uri, "--key", "k").code());
        assertEquals(Kvctl.EXIT_MISS, kvctl("exists", "--store", uri, "--key", "k").code());
    }

    @Test
    void unknownStoreFailsWithTheHint() {
        Run r = kvctl("exists", "--store", "nosuch://h:1", "--key", "k");
        assertEquals(Kvctl.EXIT_FAILURE, r.code());
        assertTrue(r.err().contains("UNKNOWN_STORE") && r.err().contains("Hint"), r.err());
    }

    @Test
    void doctorPassesOnAHealthyStoreAndExplainsABadUri() {
        Run ok = kvctl("doctor", "--store", "memory:?capacity=64MiB");
        assertEquals(0, ok.code(), ok.out() + ok.err());
        assertTrue(ok.out().contains("ok   round trip") && ok.out().strip().endsWith("healthy"), ok.out());
        assertTrue(ok.out().contains("info cuda: "), ok.out());
        Run bad = kvctl("doctor", "--store", "memory:?capacity=2");
        assertEquals(Kvctl.EXIT_FAILURE, bad.code());
        assertTrue(bad.out().contains("FAIL round trip") && bad.out().contains("VALUE_TOO_LARGE"), bad.out());
        Run typo = kvctl("doctor", "--store", "memory:?capcity=1GiB");
        assertEquals(Kvctl.EXIT_FAILURE, typo.code());
        assertTrue(typo.out().contains("FAIL open") && typo.out().contains("capcity"), typo.out());
    }

    @Test
    void keyPrintsVllmV0KvThenHiddenKey() {
        Run r = kvctl("key", "--scheme", "vllm-v0", "--tp-rank", "0", "--tokens", "1,2,3");
        assertEquals(0, r.code(), r.err());
        assertEquals("12086052994506337185_0\n12086052994506337185_hidden_0\n", r.out());
        assertTrue(kvctl("key", "--scheme", "vllm-v0", "--tp-rank", "3", "--tokens", "1,2,3").out()
                .startsWith("12086052994506337185_3\n"));
    }

    @Test
    void keyPrintsOneLmcacheKeyPerChunkFromATokensFile(@TempDir Path dir) throws IOException {
        Path f = dir.resolve("tokens.txt");
        Files.writeString(f, "0, 1 2\n3\n4,5,6,7\n");
        Run r = kvctl("key", "--scheme", "lmcache-v0", "--model", "test/model", "--world-size", "1", "--worker-id", "0",
                "--chunk-size", "4", "--tokens-file", f.toString());
        assertEquals(0, r.code(), r.err());
        assertEquals("vllm@test/model@1@0@a1e03200f1f82ad2c1cec8795c271aaecf98f5aa2d151d2229ec5fa0c177cf77\n"
                + "vllm@test/model@1@0@b7ba39079729733940d601469f53c311e28249df7c29f60ac422ae74a40705cb\n", r.out());
        Run hf = kvctl("key", "--scheme", "lmcache-v0", "--model", "m", "--chunk-size", "4", "--fmt", "huggingface",
                "--tokens", "0,1,2,3");
        assertTrue(hf.out().startsWith("huggingface@m@1@0@a1e03200"), hf.out());
    }

    @Test
    void keyPrintsLmcacheV1KeysWithTheSameChunkHashesAndTheLayoutsDtype() {
        Run r = kvctl("key", "--scheme", "lmcache-v1", "--model", "test/model", "--chunk-size", "4", "--tokens",
                "0,1,2,3,4,5,6,7");
        assertEquals(0, r.code(), r.err());
        assertEquals("test/model@1@0@a1e03200f1f82ad2c1cec8795c271aaecf98f5aa2d151d2229ec5fa0c177cf77@bfloat16\n"
                + "test/model@1@0@b7ba39079729733940d601469f53c311e28249df7c29f60ac422ae74a40705cb@bfloat16\n", r.out());
    }

    @Test
    void objectsRoundTripThroughAnLmcacheServerAndDoctorNotesTheMissingDelete(@TempDir Path dir) throws IOException {
        LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V1).capacityBytes(64L << 20).build()
                .start();
        try {
            String uri = "lm://127.0.0.1:" + server.boundPort();
            Path in = dir.resolve("in.bin");
            byte[] data = new byte[300_000];
            new java.util.Random(1).nextBytes(data);
            Files.write(in, data);
            assertEquals(0, kvctl("put", "--store", uri, "--key", "obj", "--in", in.toString()).code());
            Path out = dir.resolve("out.bin");
            assertEquals(0, kvctl("get", "--store", uri, "--key", "obj", "--out", out.toString()).code());
            assertEquals(-1, Files.mismatch(in, out));
            assertEquals(0, kvctl("exists", "--store", uri, "--key", "obj").code());
            Run doctor = kvctl("doctor", "--store", uri);
            assertEquals(0, doctor.code(), doctor.out());
            assertTrue(doctor.out().contains("remove not supported by this store"), doctor.out());
        } finally {
            server.stop();
        }
        Run down = kvctl("doctor", "--store", "lm://127.0.0.1:" + server.boundPort());
        assertEquals(Kvctl.EXIT_FAILURE, down.code());
        assertTrue(down.out().contains("FAIL health") && down.out().contains("STORE_UNREACHABLE"), down.out());
    }

    @Test
    void doctorChecksAMooncakeStoreThroughTheNativeTestDouble() {
        Path lib = Path.of("../native/target/lib/libmooncake_store_double.so").toAbsolutePath().normalize();
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.exists(lib) || "true".equals(System.getenv("CI")),
                "the Mooncake test double was not built (no cmake): " + lib);
        Run r = kvctl("doctor", "--store", "mooncake://127.0.0.1:50051?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1"
                + "&probe-timeout=0&library=" + lib);
        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("ok   round trip") && r.out().contains("healthy"), r.out());
        Run missing = kvctl("doctor", "--store", "mooncake://127.0.0.1:50051?metadata=P2PHANDSHAKE"
                + "&local_hostname=127.0.0.1&library=/nonexistent/libmooncake_store.so");
        assertEquals(Kvctl.EXIT_FAILURE, missing.code());
        assertTrue(missing.out().contains("NATIVE_LIBRARY_MISSING") && missing.out().contains("WITH_STORE_C_SHARED"),
                missing.out());
    }

    @Test
    void badTokensNameThePosition() {
        Run r = kvctl("key", "--scheme", "vllm-v0", "--tokens", "1,2,x");
        assertEquals(Kvctl.EXIT_FAILURE, r.code());
        assertTrue(r.err().contains("token 3") && r.err().contains("'x'"), r.err());
    }

    @Test
    void benchReportsLayersBesideTheMemcpyFloorAndWritesJson(@TempDir Path dir) throws IOException {
        Path json = dir.resolve("bench.json");
        Run r = kvctl("bench", "--store", "memory:", "--model", "qwen2.5-0.5b", "--tokens", "300", "--iterations", "3",
                "--warmup", "1", "--json", json.toString());
        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("memcpy floor") && r.out().contains("drop-select"), r.out());
        assertTrue(r.out().contains("payload copies: " + NativeCopy.status()), "bench does not say which copy ran: "
                + r.out());
        JsonNode n = new ObjectMapper().readTree(json.toFile());
        assertEquals(NativeCopy.available(), n.get("native_copy").asBoolean(), n.toString());
        assertEquals(300, n.get("tokens").asInt());
        assertEquals(300L * 512, n.get("layer_bytes").asLong());
        assertTrue(n.get("insert_layer_p50_ns").asLong() > 0);
        assertTrue(n.get("drop_ratio_to_memcpy").asDouble() > 0);
        assertTrue(r.err().contains("4/4"), r.err());
    }

    @Test
    void everySubcommandTakesShortAndLongHelp() {
        picocli.CommandLine cl = new picocli.CommandLine(Kvctl.class);
        assertTrue(cl.getSubcommands().size() >= 11, cl.getSubcommands().keySet().toString());
        for (String name : cl.getSubcommands().keySet()) {
            for (String help : new String[] {"-h", "--help"}) {
                Run r = kvctl(name, help);
                assertEquals(0, r.code(), name + " " + help + ": " + r.err());
                assertTrue(r.out().startsWith("Usage: kvctl " + name), name + " " + help + ": " + r.out());
            }
            assertEquals("kvctl 0.1.0", kvctl(name, "--version").out().strip(), name);
        }
    }

    @Test
    void doctorReportsTheFirstRoundTripApartAndNamesTheStoreOnce() {
        Run r = kvctl("doctor", "--store", "memory:?capacity=64MiB");
        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("ok   health: memory:?capacity=64MiB holds 0 keys"), r.out());
        assertTrue(!r.out().contains("::"), r.out());
        assertTrue(r.out().matches("(?s).*ok   round trip: 1 MiB put [0-9.]+ ms, get [0-9.]+ ms \\(the first one, with "
                + "one-time setup costs: put [0-9.]+ ms, get [0-9.]+ ms\\), remove ok.*"), r.out());
    }

    @Test
    void aMissingInputFileSaysNoSuchFile(@TempDir Path dir) {
        Path missing = dir.resolve("absent.bin");
        Run put = kvctl("put", "--store", "memory:", "--key", "k", "--in", missing.toString());
        assertEquals(Kvctl.EXIT_FAILURE, put.code());
        assertTrue(put.err().contains("cannot read " + missing + ": no such file or directory"), put.err());
        Run key = kvctl("key", "--tokens-file", missing.toString());
        assertEquals(Kvctl.EXIT_FAILURE, key.code());
        assertTrue(key.err().contains("cannot read tokens file " + missing + ": no such file or directory"), key.err());
    }

    @Test
    void benchRemovesTheShmFileItCreatedAndKeepsOneThatExisted(@TempDir Path dir) throws IOException {
        String name = "kvctl-bench-" + ProcessHandle.current().pid();
        String uri = "shm:/" + name + "?capacity=16MiB&dir=" + dir;
        String[] bench = {"bench", "--store", uri, "--model", "qwen2.5-0.5b", "--tokens", "64", "--iterations", "1",
                "--warmup", "0"};
        Run created = kvctl(bench);
        assertEquals(0, created.code(), created.out() + created.err());
        assertTrue(created.out().contains("removed the shm store's file " + dir.resolve(name)), created.out());
        assertTrue(Files.notExists(dir.resolve(name)));
        try (var s = dev.kvconnector.store.KVStores.open(uri)) {
            assertTrue(Files.exists(dir.resolve(name)), s.uri());
        }
        Run kept = kvctl(bench);
        assertEquals(0, kept.code(), kept.out() + kept.err());
        assertTrue(kept.out().contains("kept the shm store's file " + dir.resolve(name)), kept.out());
        assertTrue(Files.exists(dir.resolve(name)));
    }

    @Test
    void benchRunsOverATieredStoreAndRemovesTheShmTiersFile(@TempDir Path dir) {
        String name = "kvctl-bench-tiered-" + ProcessHandle.current().pid();
        String uri = "tiered:[shm:/" + name + "?capacity=32MiB&dir=" + dir + "][memory:?capacity=32MiB]?write=back";
        Run r = kvctl("bench", "--store", uri, "--model", "qwen2.5-0.5b", "--tokens", "64", "--iterations", "2",
                "--warmup", "1");

        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("store tiered:[shm:/" + name) && r.out().contains("drop-select"), r.out());
        assertTrue(r.out().contains("removed the shm store's file " + dir.resolve(name)), r.out());
        assertTrue(Files.notExists(dir.resolve(name)));
    }
}
