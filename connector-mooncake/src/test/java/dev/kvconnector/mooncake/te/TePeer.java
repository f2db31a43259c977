package dev.kvconnector.mooncake.te;

import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

/**
 * The other process of {@link TeTwoProcessTest}: opens its own engine, opens the parent's segment and moves bytes
 * to or from the parent's registered memory. Prints {@code RESULT ...} lines, and {@code DONE} at the end.
 *
 * <p>Arguments: mode, engine URI, the parent's segment name, the parent's address, bytes, seed.
 */
public final class TePeer {
    private TePeer() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String peerName = args[2];
        long remote = Long.parseLong(args[3]);
        long bytes = Long.parseLong(args[4]);
        long seed = Long.parseLong(args[5]);
        try (TransferEngine engine = TransferEngine.open(args[1]); Arena arena = Arena.ofShared()) {
            MemorySegment local = arena.allocate(bytes, 4096);
            engine.register(local, "cpu:0");
            RemoteSegment peer = engine.openSegment(peerName);
            switch (mode) {
                case "write" -> {
                    TePattern.fill(local, 0, seed);
                    System.out.println("RESULT " + transfer(engine, local, peer, remote, bytes, true));
                }
                case "read" -> {
                    String result = transfer(engine, local, peer, remote, bytes, false);
                    System.out.println("RESULT " + result + " mismatch=" + TePattern.firstMismatch(local, 0, seed));
                }
                case "notify" -> notifyChunks(engine, local, peer, remote, bytes, seed);
                case "concurrent" -> concurrent(engine, local, peer, remote, bytes, seed);
                default -> throw new IllegalArgumentException(mode);
            }
            engine.unregister(local);
        }
        System.out.println("DONE");
    }

    private static String transfer(TransferEngine engine, MemorySegment local, RemoteSegment peer, long remote,
                                   long bytes, boolean write) {
        try (TransferBatch batch = engine.newBatch(1)) {
            int added = write ? batch.write(local, peer, remote, bytes) : batch.read(local, peer, remote, bytes);
            int rc = added < 0 ? added : batch.submit();
            if (rc != 0) {
                return "SUBMIT " + rc + " " + batch.submitFailure(rc).getMessage();
            }
            int end = batch.await(30, TimeUnit.SECONDS);
            KVException failure = batch.failure();
            return name(end) + (failure == null ? "" : " " + failure.code() + " " + failure.getMessage());
        }
    }

    /** Eight chunks, one batch each, each followed by a notification that names it. */
    private static void notifyChunks(TransferEngine engine, MemorySegment local, RemoteSegment peer, long remote,
                                     long bytes, long seed) {
        int chunks = 8;
        long chunk = bytes / chunks;
        TePattern.fill(local, 0, seed);
        try (TransferBatch batch = engine.newBatch(1)) {
            for (int i = 0; i < chunks; i++) {
                batch.write(local.asSlice(i * chunk, chunk), peer, remote + i * chunk, chunk);
                int rc = batch.submit("req-7", "chunk " + i);
                if (rc != 0) {
                    throw batch.submitFailure(rc);
                }
                System.out.println("RESULT " + i + " " + name(batch.await(30, TimeUnit.SECONDS)));
                batch.reset();
            }
        }
        System.out.println("RESULT notify " + engine.notify(peer, "req-7", "end"));
    }

    /** Two threads, two batches at once, each into its half of the parent's memory. */
    private static void concurrent(TransferEngine engine, MemorySegment local, RemoteSegment peer, long remote,
                                   long bytes, long seed) throws InterruptedException {
        long half = bytes / 2;
        TePattern.fill(local, 0, seed);
        String[] results = new String[2];
        Thread[] threads = new Thread[2];
        for (int t = 0; t < 2; t++) {
            int id = t;
            threads[t] = Thread.ofPlatform().start(() -> {
                StringBuilder sb = new StringBuilder();
                try (TransferBatch batch = engine.newBatch(4)) {
                    long quarter = half / 4;
                    for (int r = 0; r < 4; r++) {
                        long off = id * half + r * quarter;
                        batch.write(local.asSlice(off, quarter), peer, remote + off, quarter);
                    }
                    int rc = batch.submit();
                    sb.append(rc == 0 ? name(batch.await(30, TimeUnit.SECONDS)) : "SUBMIT " + rc);
                }
                results[id] = sb.toString();
            });
        }
        for (Thread t : threads) {
            t.join();
        }
        System.out.println("RESULT " + results[0] + " " + results[1]);
    }

    static String name(int pollCode) {
        return switch (pollCode) {
            case TransferBatch.IN_FLIGHT -> "IN_FLIGHT";
            case TransferBatch.COMPLETED -> "COMPLETED";
            case TransferBatch.FAILED -> "FAILED";
            case TransferBatch.TIMED_OUT -> "TIMED_OUT";
            case TransferBatch.NOTHING_SUBMITTED -> "NOTHING_SUBMITTED";
            case TransferBatch.STATUS_ERROR -> "STATUS_ERROR";
            default -> "CODE " + pollCode;
        };
    }
}
