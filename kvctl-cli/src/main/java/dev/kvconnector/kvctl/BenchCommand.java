package dev.kvconnector.kvctl;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.kvconnector.connector.ConnectorMetrics;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.NativeCopy;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.shm.ShmStore;
import dev.kvconnector.workload.TransferWorkload;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.HdrHistogram.Histogram;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * Inserts and drop-selects a model-sized request repeatedly through {@link TransferWorkload} (the same code the JMH
 * suite runs) and reports per-layer p50/p99 latency and GB/s beside the memory floor measured in the same run: one
 * {@code MemorySegment.copy} of the whole request's tensors (as cold in cache as the transfer), per layer.
 */
@Command(name = "bench", description = "Measure per-layer insert and drop-select latency against the memory floor.")
final class BenchCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;
    @Mixin
    StoreOption store;
    @Option(names = "--model", defaultValue = "llama3-8b", description = "Layout preset: ${COMPLETION-CANDIDATES}")
    String model;
    @Option(names = "--tokens", defaultValue = "1024", description = "Prompt tokens per request")
    int tokens;
    @Option(names = "--iterations", defaultValue = "30", description = "Measured requests")
    int iterations;
    @Option(names = "--warmup", defaultValue = "5", description = "Unmeasured requests first")
    int warmup;
    @Option(names = "--layers-only", description = "Move only the layers, not the hidden states")
    boolean layersOnly;
    @Option(names = "--no-checksums", description = "Write layer objects without their payload checksum")
    boolean noChecksums;
    @Option(names = "--json", paramLabel = "FILE", description = "Also write the results as JSON")
    Path json;

    @Override
    public Integer call() throws IOException {
        if (iterations < 1 || warmup < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "--iterations must be >= 1 and --warmup >= 0").build();
        }
        KVLayout layout = KVLayout.preset(model);
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        Map<String, Object> report = new LinkedHashMap<>();
        Map<Path, Boolean> shmFiles = new LinkedHashMap<>();
        for (Path f : shmFiles(StoreUri.parse(store.uri))) {
            shmFiles.put(f, Files.exists(f));
        }
        try (KVStore s = KVStores.open(store.uri);
             TransferWorkload w = new TransferWorkload(s, layout, tokens, !layersOnly, !noChecksums)) {
            out.printf("kvctl bench: %s, %d tokens, %d layers x %.2f MiB per layer, store %s%n", layout.name(), tokens,
                    layout.numLayers(), w.layerBytes() / 1048576.0, s.uri());
            Histogram request = new Histogram(3);
            int total = warmup + iterations;
            for (int i = 0; i < total; i++) {
                if (i == warmup) {
                    w.connector().resetMetrics();
                }
                long t0 = System.nanoTime();
                w.insert(i);
                DropResult r = w.dropSelect(i);
                long t1 = System.nanoTime();
                if (!r.isComplete()) {
                    throw KVException.of(ErrorCode.INTERNAL, "request " + i + " missed: " + r).store(s.uri()).build();
                }
                if (i == 0 && !w.targetMatchesSource()) {
                    throw KVException.of(ErrorCode.CORRUPT_OBJECT, "drop-select returned other bytes than inserted")
                            .store(s.uri()).build();
                }
                if (i >= warmup) {
                    request.recordValue(t1 - t0);
                }
                progress(err, i + 1, total);
            }
            err.println();
            ConnectorMetrics.Snapshot m = w.connector().metrics();
            Histogram copy = new Histogram(3);
            for (int i = 0; i < iterations + 2; i++) {
                long nanos = w.copyRequestOnce();
                if (i >= 2) {
                    copy.recordValue(Math.max(1, nanos / layout.numLayers()));
                }
            }
            long copyP50 = copy.getValueAtPercentile(50);
            out.printf("%-22s %10s %10s %10s %12s%n", "per layer", "p50 us", "p99 us", "GB/s", "x memcpy p50");
            row(out, "memcpy floor", copyP50, copy.getValueAtPercentile(99), w.layerBytes(), copyP50);
            row(out, "insert", m.insertLayer().p50Nanos(), m.insertLayer().p99Nanos(), w.layerBytes(), copyP50);
            row(out, "drop-select", m.dropLayer().p50Nanos(), m.dropLayer().p99Nanos(), w.layerBytes(), copyP50);
            out.printf("whole request (insert + drop-select): p50 %.2f ms, p99 %.2f ms over %d requests%n",
                    request.getValueAtPercentile(50) / 1e6, request.getValueAtPercentile(99) / 1e6, iterations);
            out.println("memcpy floor: one MemorySegment.copy of the whole request's tensors, divided by its layers.");
            out.println("layer latency includes the copy into or out of staging, the 64-byte header"
                    + (noChecksums ? "" : " with its payload checksum") + ", and the store's own put or get.");
            out.println("payload copies: " + NativeCopy.status());
            String hint = ValkeyAllocatorHint.probe(store.uri);
            if (hint != null) {
                out.println(hint);
            }
            out.flush();
            report.put("store", s.uri());
            report.put("model", layout.name());
            report.put("tokens", tokens);
            report.put("layers", layout.numLayers());
            report.put("layer_bytes", w.layerBytes());
            report.put("iterations", iterations);
            report.put("checksums", !noChecksums);
            report.put("native_copy", NativeCopy.available());
            report.put("memcpy_layer_p50_ns", copyP50);
            report.put("insert_layer_p50_ns", m.insertLayer().p50Nanos());
            report.put("insert_layer_p99_ns", m.insertLayer().p99Nanos());
            report.put("drop_layer_p50_ns", m.dropLayer().p50Nanos());
            report.put("drop_layer_p99_ns", m.dropLayer().p99Nanos());
            report.put("insert_ratio_to_memcpy", (double) m.insertLayer().p50Nanos() / copyP50);
            report.put("drop_ratio_to_memcpy", (double) m.dropLayer().p50Nanos() / copyP50);
            report.put("request_p50_ns", request.getValueAtPercentile(50));
            report.put("request_p99_ns", request.getValueAtPercentile(99));
            report.put("server_hint", hint);
        } finally {
            shmFiles.forEach((file, existed) -> cleanUpShm(file, existed, out));
        }
        if (json != null) {
            ObjectMapper mapper = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
            try {
                AtomicFile.write(json, tmp -> {
                    mapper.writeValue(tmp.toFile(), report);
                    return true;
                });
            } catch (IOException e) {
                throw KVException.of(ErrorCode.IO_ERROR, "cannot write --json " + json + ": " + ObjectFiles.reason(e))
                        .build();
            }
            out.println("wrote " + json);
        }
        return 0;
    }

    /**
     * The files the {@code shm:} stores of {@code u} live in (as {@code ShmStore} names them): its own, or those of
     * its inner stores ({@code tiered:[shm:/kv][...]}); none for other stores.
     */
    private static List<Path> shmFiles(StoreUri u) {
        List<Path> files = new ArrayList<>();
        for (String inner : u.nested()) {
            files.addAll(shmFiles(StoreUri.parse(inner)));
        }
        if (u.scheme().equals("shm")) {
            String name = u.path().startsWith("/") ? u.path().substring(1) : u.path();
            files.add(Path.of(u.param("dir") == null ? ShmStore.DEFAULT_DIR : u.param("dir")).resolve(name));
        }
        return files;
    }

    /**
     * Removes the shm file this bench created (its requests were dropped, so it holds nothing), and says so; one
     * that existed before is kept, with its place and size, since other processes may use it.
     */
    private static void cleanUpShm(Path file, boolean existed, PrintWriter out) {
        try {
            long bytes = Files.size(file);
            if (existed) {
                out.printf("kept the shm store's file %s (%.1f MiB): it existed before this bench%n", file,
                        bytes / 1048576.0);
            } else {
                Files.delete(file);
                out.printf("removed the shm store's file %s (%.1f MiB) that this bench created%n", file,
                        bytes / 1048576.0);
            }
        } catch (NoSuchFileException e) {
            // the store was never created (it failed to open)
        } catch (IOException e) {
            out.println("could not remove the shm store's file " + file + " that this bench created: "
                    + ObjectFiles.reason(e));
        }
        out.flush();
    }

    private static void row(PrintWriter out, String name, long p50, long p99, long bytes, long floor) {
        out.printf("%-22s %10.1f %10.1f %10.2f %12.2f%n", name, p50 / 1e3, p99 / 1e3, bytes / (double) Math.max(1, p50),
                p50 / (double) Math.max(1, floor));
    }

    private static void progress(PrintWriter err, int done, int total) {
        int width = 30;
        int filled = done * width / total;
        err.print("\r[" + "#".repeat(filled) + " ".repeat(width - filled) + "] " + done + "/" + total);
        err.flush();
    }
}
