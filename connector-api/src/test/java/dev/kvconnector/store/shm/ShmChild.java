package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;

/**
 * The other process of the multi-process tests. It prints one line per milestone on stdout and exits 0 when all
 * went well, 3 on a torn or wrong value, 5 when a put or get failed with a {@link KVException} (printed as
 * {@code FAILED CODE message} first).
 *
 * <pre>
 *   write URI MILLIS KEYS SEED     puts pattern values of 16 B to 64 KiB under key-0..key-(KEYS-1)
 *   read URI MILLIS KEYS           reads them and verifies every byte
 *   put URI KEY BYTES SEED         one put (with the test-hook properties set, a slow one, which prints PAUSED
 *                                  once it sleeps in the hook half-way through its copy)
 *   get URI KEY BYTES              one get into a BYTES buffer (with the get hook set, a slow one, which prints
 *                                  PAUSED once it sleeps in the hook, holding the lease it has checked)
 *   claim URI KEY BYTES SEED HOW   claims BYTES, writes a pattern value into the claim, then commits it
 *                                  (HOW=commit) or prints CLAIMED and waits to be killed (HOW=hang)
 *   view URI KEY HOW               views the key and verifies every byte in place, then releases the view
 *                                  (HOW=release) or prints HOLDING and waits to be killed (HOW=hold)
 *   churn URI MILLIS KEYS SEED     for MILLIS, at random over key-0..key-(KEYS-1): claims and commits, claims and
 *                                  aborts, views (verifying every byte in place, sometimes across a later
 *                                  operation) and removes, with pattern values of 4 to 256 KiB
 * </pre>
 */
public final class ShmChild {
    private ShmChild() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        String mode = args[0];
        boolean failed = false;
        try (ShmStore store = ShmStore.open(StoreUri.parse(args[1])); Arena arena = Arena.ofConfined()) {
            System.out.println("OPEN pid=" + ProcessHandle.current().pid());
            switch (mode) {
                case "write" -> write(store, arena, Long.parseLong(args[2]), Integer.parseInt(args[3]),
                        Long.parseLong(args[4]));
                case "read" -> read(store, arena, Long.parseLong(args[2]), Integer.parseInt(args[3]));
                case "put" -> {
                    long bytes = Long.parseLong(args[3]);
                    MemorySegment v = arena.allocate(bytes, 8);
                    ValuePattern.fill(v, bytes, Long.parseLong(args[4]));
                    System.out.println("PUTTING");
                    announceWhenPausedIn(Thread.currentThread(), "copyIn", "PAUSED");
                    failed = failed(() -> System.out.println("PUT " + store.put(args[2], v, PutOptions.DEFAULT)));
                }
                case "get" -> {
                    MemorySegment dst = arena.allocate(Long.parseLong(args[3]), 8);
                    System.out.println("GETTING");
                    announceWhenPausedIn(Thread.currentThread(), "getInto", "PAUSED");
                    long[] got = new long[1];
                    failed = failed(() -> got[0] = store.getInto(args[2], dst));
                    if (failed) {
                        break;
                    }
                    long r = got[0];
                    String bad = GetResult.isHit(r) ? ValuePattern.verify(dst, r) : null;
                    System.out.println("GOT " + GetResult.describe(r) + (bad == null ? "" : " TORN " + bad));
                    if (bad != null) {
                        System.exit(3);
                    }
                }
                case "claim" -> claim(store, args[2], Long.parseLong(args[3]), Long.parseLong(args[4]),
                        args[5].equals("commit"));
                case "view" -> view(store, args[2], args[3].equals("hold"));
                case "churn" -> churn(store, Long.parseLong(args[2]), Integer.parseInt(args[3]),
                        Long.parseLong(args[4]));
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            }
        }
        System.out.flush();
        if (failed) {
            System.exit(5);
        }
    }

    /** Runs {@code call}; when it fails with a {@link KVException}, prints {@code FAILED CODE message} and says so. */
    private static boolean failed(Runnable call) {
        try {
            call.run();
            return false;
        } catch (KVException e) {
            System.out.println("FAILED " + e.code() + " " + e.getMessage());
            return true;
        }
    }

    private static void claim(ShmStore store, String key, long bytes, long seed, boolean commit) {
        StoreClaim claim = store.newClaim();
        int code = store.tryClaim(key, bytes, PutOptions.DEFAULT, claim);
        if (code != ClaimResult.CLAIMED) {
            System.out.println("CLAIM " + ClaimResult.describe(code));
            System.exit(4);
        }
        ValuePattern.fill(claim.segment(), bytes, seed);
        if (commit) {
            System.out.println("COMMITTED " + claim.commit());
            return;
        }
        System.out.println("CLAIMED");
        System.out.flush();
        sleepUntilKilled();
    }

    private static void view(ShmStore store, String key, boolean hold) {
        StoreView view = store.newView();
        long r = store.tryView(key, view);
        if (!GetResult.isHit(r)) {
            System.out.println("VIEWED " + GetResult.describe(r));
            return;
        }
        String bad = ValuePattern.verify(view.segment(), r);
        System.out.println("VIEWED " + r + (bad == null ? "" : " TORN " + bad));
        if (bad != null) {
            System.exit(3);
        }
        if (hold) {
            System.out.println("HOLDING");
            System.out.flush();
            sleepUntilKilled();
        }
        view.release();
    }

    private static void churn(ShmStore store, long millis, int keys, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        StoreClaim claim = store.newClaim();
        StoreView view = store.newView();
        StoreView held = store.newView();
        long heldBytes = 0;
        long commits = 0;
        long aborts = 0;
        long views = 0;
        long full = 0;
        long end = System.nanoTime() + millis * 1_000_000;
        while (System.nanoTime() < end) {
            String key = "key-" + rnd.nextInt(keys);
            switch (rnd.nextInt(5)) {
                case 0, 1 -> {
                    long bytes = (4L << 10) + 8L * rnd.nextInt(32 << 10);
                    int code = store.tryClaim(key, bytes, PutOptions.DEFAULT, claim);
                    if (code == ClaimResult.FULL) {
                        full++;
                        break;
                    }
                    ValuePattern.fill(claim.segment(), bytes, rnd.nextLong());
                    if (rnd.nextInt(4) == 0) {
                        claim.abort();
                        aborts++;
                    } else {
                        claim.commit();
                        commits++;
                    }
                }
                case 2 -> {
                    long r = store.tryView(key, view);
                    if (GetResult.isHit(r)) {
                        verifyOrExit(key, view.segment(), r);
                        view.release();
                        views++;
                    }
                }
                case 3 -> {
                    if (held.isHeld()) {
                        verifyOrExit("the held view", held.segment(), heldBytes);
                        held.release();
                    } else {
                        heldBytes = store.tryView(key, held);
                        if (!GetResult.isHit(heldBytes)) {
                            heldBytes = 0;
                        }
                    }
                }
                default -> store.remove(key);
            }
        }
        if (held.isHeld()) {
            verifyOrExit("the held view", held.segment(), heldBytes);
            held.release();
        }
        System.out.println("DONE commits=" + commits + " aborts=" + aborts + " views=" + views + " full=" + full);
    }

    private static void verifyOrExit(String what, MemorySegment value, long bytes) {
        String bad = ValuePattern.verify(value, bytes);
        if (bad != null) {
            System.out.println("TORN " + what + ": " + bad);
            System.out.flush();
            System.exit(3);
        }
    }

    /**
     * Prints {@code line} once {@code thread} sleeps inside a store method named {@code method}. The test hooks sleep
     * only past the point where the store has checked what it took (a read's lease against the index), so a parent
     * that waits for the line knows the child holds it, where a poll of the file can catch the lease in the instant
     * between taking and checking it, when the parent's own remove still makes the child drop it and miss.
     */
    private static void announceWhenPausedIn(Thread thread, String method, String line) {
        Thread watcher = new Thread(() -> {
            while (!sleepsIn(thread, method)) {
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    return;
                }
            }
            System.out.println(line);
            System.out.flush();
        }, "pause-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    /** Whether the innermost store frame of {@code thread} is the test hooks' {@code pause}, called from {@code method}. */
    private static boolean sleepsIn(Thread thread, String method) {
        if (thread.getState() != Thread.State.TIMED_WAITING) {
            return false;
        }
        boolean inPause = false;
        for (StackTraceElement f : thread.getStackTrace()) {
            if (!f.getClassName().startsWith(ShmChild.class.getPackageName())) {
                continue;
            }
            if (!inPause && !f.getMethodName().equals("pause")) {
                return false;
            }
            inPause = true;
            if (f.getMethodName().equals(method)) {
                return true;
            }
        }
        return false;
    }

    private static void sleepUntilKilled() {
        try {
            Thread.sleep(Long.MAX_VALUE);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void write(ShmStore store, Arena arena, long millis, int keys, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        MemorySegment v = arena.allocate(64 << 10, 8);
        long puts = 0;
        long full = 0;
        long end = System.nanoTime() + millis * 1_000_000;
        while (System.nanoTime() < end) {
            long len = 16 + 8L * rnd.nextInt(8191);
            ValuePattern.fill(v, len, rnd.nextLong());
            try {
                store.put("key-" + rnd.nextInt(keys), v.asSlice(0, len), PutOptions.DEFAULT);
                puts++;
            } catch (KVException e) {
                if (e.code() != ErrorCode.STORE_FULL) {
                    throw e;
                }
                full++;
            }
        }
        System.out.println("DONE puts=" + puts + " full=" + full);
    }

    private static void read(ShmStore store, Arena arena, long millis, int keys) {
        SplittableRandom rnd = new SplittableRandom();
        MemorySegment dst = arena.allocate(64 << 10, 8);
        long reads = 0;
        long hits = 0;
        long end = System.nanoTime() + millis * 1_000_000;
        while (System.nanoTime() < end) {
            String key = "key-" + rnd.nextInt(keys);
            long r = store.getInto(key, dst);
            reads++;
            if (GetResult.isHit(r)) {
                hits++;
                String bad = ValuePattern.verify(dst, r);
                if (bad != null) {
                    System.out.println("TORN " + key + ": " + bad);
                    System.out.flush();
                    System.exit(3);
                }
            } else if (!GetResult.isMiss(r)) {
                System.out.println("TORN " + key + ": unexpected result " + GetResult.describe(r));
                System.exit(3);
            }
        }
        System.out.println("DONE reads=" + reads + " hits=" + hits);
    }
}
