package dev.kvconnector.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The benchmark's peer JVM, commanded both ways: it drop-selects what this JVM puts, by copy or in place, and leaves
 * nothing behind.
 */
class ShmPeerProcessTest {
    private static final String KEY = "test/peer-layer";
    private static final long BYTES = 1 << 20;

    @ParameterizedTest
    @EnumSource(ShmPeerProcess.Signal.class)
    void thePeerDropSelectsWhatThisJvmPutsAndQuitsCleanly(ShmPeerProcess.Signal signal) throws IOException {
        List<Path> signalFilesBefore = signalFiles();
        try (StoreFixture fixture = StoreFixture.start("shm:/kvc-peer-test-{unique}?capacity=16MiB");
             KVStore kv = KVStores.open(fixture.uri());
             Arena arena = Arena.ofConfined()) {
            MemorySegment layer = LayerShape.randomSegment(arena, BYTES);
            try (ShmPeerProcess peer = ShmPeerProcess.start(fixture.uri(), KEY, BYTES, signal)) {
                assertEquals('K', peer.call('P'), "the control channel's round trip");
                assertEquals('M', peer.call('D'), "a drop-select of a key nobody put is a miss");
                kv.put(KEY, layer, PutOptions.DEFAULT);
                assertEquals('K', peer.call('V'), "the peer read the layer byte for byte");
                assertFalse(kv.exists(KEY), "the peer's drop-select removed the layer");
                kv.put(KEY, layer, PutOptions.DEFAULT);
                assertEquals('K', peer.call('D'));
                assertEquals('M', peer.call('S'), "a drop-select in place of a key nobody put is a miss");
                kv.put(KEY, layer, PutOptions.DEFAULT);
                assertEquals('K', peer.call('W'), "the peer viewed the layer in place, byte for byte");
                assertFalse(kv.exists(KEY), "the peer's drop-select in place removed the layer");
                layer.set(java.lang.foreign.ValueLayout.JAVA_BYTE, BYTES / 2, (byte) ~layer.get(
                        java.lang.foreign.ValueLayout.JAVA_BYTE, BYTES / 2));
                kv.put(KEY, layer, PutOptions.DEFAULT);
                assertEquals('M', peer.call('W'), "a flipped byte is seen through the view");
                kv.put(KEY, layer, PutOptions.DEFAULT);
                assertEquals('K', peer.call('S'));
            }
        }
        assertEquals(signalFilesBefore, signalFiles(), "the signal file is removed when the peer is closed");
    }

    private static List<Path> signalFiles() throws IOException {
        try (Stream<Path> files = Files.list(Path.of("/dev/shm"))) {
            return files.filter(f -> f.getFileName().toString().startsWith("kvc-xproc-signal-")).sorted().toList();
        }
    }
}
