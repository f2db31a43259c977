/**
 * The {@code shm:} store: byte objects in one memory-mapped file per store, shared by every process of one user on
 * one host. {@link dev.kvconnector.store.shm.ShmStore} describes the guarantees and the recovery of
 * crashed processes; {@code ShmLayout} the file format.
 *
 * <h2>URI</h2>
 * {@code shm:/NAME?capacity=4GiB&dir=/dev/shm&entries=65536&block=4KiB&ttl=0&events=1MiB}
 * <ul>
 *   <li>{@code NAME}: the file name, {@code [A-Za-z0-9._-]}, 1 to 200 characters.</li>
 *   <li>{@code capacity}: payload bytes (default 1 GiB), a hard bound; the file is that plus the tables. On
 *       tmpfs the file is sparse: pages are taken as values are written.</li>
 *   <li>{@code dir}: the directory (default {@code /dev/shm}).</li>
 *   <li>{@code entries}: most objects held at once (default capacity / 64 KiB, within 1024 and 2^24).</li>
 *   <li>{@code block}: allocation unit in bytes (default 4 KiB; a power of two from 64 B to 16 MiB). Each value
 *       takes whole blocks.</li>
 *   <li>{@code ttl}: time to live of puts that carry none (default 0, forever).</li>
 *   <li>{@code eviction}: {@code lru} (default; approximated by CLOCK) evicts committed entries to make room;
 *       {@code refuse} fails such puts with {@code STORE_FULL} instead. A setting of this process's puts, not of
 *       the file.</li>
 *   <li>{@code lock-timeout}: how long a call waits for the store lock held by a live process before it fails
 *       with {@code TIMEOUT} (default 30 s); a dead holder is taken over within milliseconds.</li>
 *   <li>{@code events}: the event ring's size in bytes (default 1 MiB, about 5,000 events of 150-byte keys; a
 *       power of two from 4 KiB to 1 GiB). A subscriber that falls this far behind is lapped and sees a gap.</li>
 * </ul>
 * The first opener creates the file (mode 0600, published atomically, so no one sees it half-written); later
 * openers adopt its sizes, and fail when their URI names different ones.
 *
 * <h2>Allocation</h2>
 * Puts, gets and sizes allocate nothing on the heap once warm: a {@code String} key is encoded, and a
 * {@code StoreKey}'s bytes are copied, into a per-thread scratch segment ({@code KeyScratch}), which names the key in
 * an error only when one is built; values are copied once between the caller's segment and the mapping. Claims,
 * commits, views and releases allocate nothing once the same blocks have been claimed or viewed before: the slice of
 * the mapping that a handle hands out comes from a {@code SliceCache} (a segment is immutable, so each new offset and
 * length would be a 40-byte object), and a consumer's freed runs are where the next request's claims land. Shown with
 * {@code ThreadMXBean} in {@code ShmStoreTest} for both (800,000 bytes per 10,000 claim-and-view rounds without the
 * cache). A claim and a view copy their key into a scratch of the handle's own, for the commit and for errors. Under
 * {@code StoreKey}s of new content, refilled in place, a request's put, claim and commit, view and release, get, batch
 * put and get, and consuming removal allocate 0 bytes per 2,000 requests once warm ({@code ShmStoreKeyTest}; the
 * {@code KVStore} defaults, through the key's string, allocated 56 bytes per key there); the index's rebuilds, which
 * the tombstones of removed keys bring, empty the slot table through a slice made once.
 *
 * <h2>Parts</h2>
 * {@code ShmStore} is a facade; each concern is a class of its own, as Agrona keeps its CnC file
 * ({@code MarkFile}), counters ({@code CountersManager}) and ring buffer layout ({@code RingBufferDescriptor})
 * apart:
 * <ul>
 *   <li>{@code ShmLayout}: the descriptor: every offset and encoding of the file, and a drawing of it;</li>
 *   <li>{@code ShmOptions}: the URI, checked once; {@code ShmFile}: creating, mapping, checking and unmapping the
 *       file; {@code ShmFileSize}: its size while mapped, and the error that names a file cut short;</li>
 *   <li>{@code ShmLock}: the cross-process lock and its back-off; {@code LeaseTable}: process slots and lease
 *       records; {@code EntryTable}: entry records and their free list; {@code BlockAllocator}: the bitmap;
 *       {@code ShmIndex}: the hash index and its seqlock;</li>
 *   <li>{@code ShmSpace}: an entry's allocation and freeing, with {@code ClockEviction} and {@code Recovery}
 *       (reaping the dead, rebuilding after a holder of the lock died);</li>
 *   <li>{@code ShmReader} and {@code ShmWriter}: the operations built on them; {@code ShmClaim} and
 *       {@code ShmView}: the zero-copy handles, and {@code SliceCache}: the slices they hand out; {@code CallGate}:
 *       the admission of each call, in flight against the close and checked against the file's size.</li>
 *   <li>{@code EventRing}: the event ring's transmitter; {@code EventReceiver}: a receiver of it;
 *       {@code ShmSubscription}: a subscriber's thread.</li>
 * </ul>
 * {@code ShmParts} wires the middle row and {@code ShmSpace} to each other, for the store and for the parts' own
 * tests, which run them over a plain segment ({@code ShmPartsBench}).
 *
 * <h2>Design in brief</h2>
 * <ul>
 *   <li>The file is mapped once per open store with {@code FileChannel.map(..., Arena.ofShared())}; closing the
 *       store closes that arena. All shared words are read and written with {@code VarHandle}s from
 *       {@code ValueLayout.JAVA_LONG.varHandle()} (volatile, acquire/release, CAS) on the mapped segment.</li>
 *   <li>Index: open addressing with linear probing over a power-of-two slot table (at most half full of live
 *       entries; rebuilt without tombstones when three quarters are used, under a seqlock epoch so that readers
 *       never report a false miss). A slot holds a 32-bit hash tag and an entry number.</li>
 *   <li>Entries: fixed records with a state word (generation and FREE, WRITING, COMMITTED or RETIRED), the writing
 *       process's token, the payload's block range and length, the expiry, the key (at most 250 UTF-8 bytes).</li>
 *   <li>Payload: a bitmap of fixed-size blocks, next-fit. One cross-process CAS spin lock guards the bitmap, the
 *       entry free list and index updates; it is held for microseconds (never during a value copy).</li>
 *   <li>Readers take no lock: they publish the entry they are about to read in a lease record of their process
 *       (a hazard pointer in the file), re-check the index slot, and copy. Removal, replacement and eviction
 *       unindex first and free the blocks only when no lease names the entry; the last reader out frees it.</li>
 *   <li>Crashes: every lock, lease and unfinished put carries a process token (pid and start time). Whoever finds
 *       the owner dead takes the lock over and rebuilds the bitmap, free list, counters and index from the entry
 *       table, drops the dead process's leases, and frees its unfinished puts.</li>
 *   <li>Events: every change to the index (a put's or claim's publication, a removal, an eviction, an expiry) is
 *       written, under the lock that made it, as a record in an event ring in the file: Agrona's broadcast buffer
 *       protocol (tail intent, record, latest, tail), so any process reads every process's changes without a lock
 *       and the writer never waits for a reader. Readers copy a record and then check that the tail intent has not
 *       come within a ring of it, so a lapped reader skips ahead (a gap in the sequence numbers) and never reads an
 *       overwritten record. A writer killed in the middle of a record left the tail behind it, so the record is never
 *       read; the sequence counter it advanced first, and the repair after a dead lock holder advances again, show
 *       readers the gap. Costs about 40 ns per put and per remove (below), under the lock.</li>
 *   <li>Zero-copy: a claim is a put whose copy the caller makes, straight into the mapping, between the allocation
 *       (entry WRITING) and the publication; a view is a read whose lease record stays set until the release. Both
 *       therefore inherit the put's and the read's crash recovery: a claim of a dead process is an unfinished put,
 *       a view of a dead process a lease in a dead process's slot.</li>
 *   <li>A file truncated under a running store (by something else: no store shrinks its file) faults (SIGBUS) on
 *       any access past the new end: the JVM raises an {@link java.lang.InternalError} for loads, stores and copies
 *       (in compiled code only at its next safepoint poll, maybe after the call returned), and a CAS run by the
 *       interpreter stops the JVM. So the file's size is checked, not the fault awaited: each call asks it as it
 *       enters ({@code CallGate}: an {@code fstat} of the open file, below) and fails with {@code CORRUPT_OBJECT},
 *       naming the file, the size it has, the size the store mapped and the likely cause (another process truncated
 *       or replaced it), where it would touch what the cut took. The header and the tables lie at the start of the
 *       file, so a cut into them fails every call (the close then frees nothing, and an event subscription reports
 *       it and stops); a cut through the payload fails the puts, claims and commits (a damaged file takes no new
 *       value), and the reads (sizes too), views and {@code segment()} calls of the values it took, while every
 *       value before the cut stays readable and removable. A truncation that races a call is caught at the store's
 *       boundary and named the same way; copies of 64 KiB or more ask the size again after the copy, whose return
 *       from native code is where compiled code's fault is raised, in the call. Only a copy under 64 KiB in compiled
 *       code that loses that race may still end with the JVM's own error after the call. A segment of a claim or view
 *       taken before the cut and used after it gets the JVM's {@code InternalError} for the lost pages, never freed
 *       memory. A file of another format version is refused at open before anything in it is written.</li>
 * </ul>
 *
 * <h2>Why plain FFM, not Agrona or Chronicle Bytes</h2>
 * Both libraries were weighed for the mapped-memory layer, as the design card asks.
 * <ul>
 *   <li><b>Agrona</b> ({@code UnsafeBuffer}, {@code AtomicBuffer}, {@code IoUtil.mapExistingFile}) offers exactly
 *       the primitives used here: ordered/volatile longs, CAS and bulk copies on a mapped file, as Aeron's CnC file
 *       and its ring buffers and counters use them. It has no shared hash index, allocator or crash recovery, so
 *       it would replace only the {@code VarHandle} calls and {@code MemorySegment.copy}. On JDK 25 its
 *       {@code UnsafeBuffer} needs {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED}, and it takes raw
 *       addresses, so every caller's {@code MemorySegment} would have to be turned into an address and length
 *       (heap segments cannot be at all).</li>
 *   <li><b>Chronicle Bytes</b> ({@code MappedBytes}, {@code MappedFile}, {@code BytesStore}) adds reference-counted
 *       mapped chunks and its own release protocol, and Chronicle Map on top of it is a complete shared off-heap
 *       map. It needs four {@code --add-opens/--add-exports} flags on JDK 25 and pulls in chronicle-core and more;
 *       Chronicle Map brings its own file format and segment locks, which would replace, not help, the lease and
 *       recovery scheme of this store.</li>
 *   <li>The project promises users need only {@code --enable-native-access}. FFM gives the same machine code for
 *       what this store does: C2 compiles segment {@code VarHandle} CAS and acquire/release to the same
 *       instructions as {@code Unsafe}, hoists the bounds checks out of loops, and {@code MemorySegment.copy} is
 *       the same intrinsic copy as {@code Unsafe.copyMemory}. A shared arena also unmaps safely: a thread that
 *       touches the mapping after {@code close()} gets an exception, where a late access to an unmapped Agrona or
 *       Chronicle buffer crashes the JVM.</li>
 *   <li>Measured (benchmarks module, {@code AgronaShmComparison}: the same operations on one mapping of a
 *       {@code /dev/shm} file, FFM and Agrona 2.3.1 runs interleaved, 2 vCPUs at load 7 to 13): a 4 MiB copy into
 *       the mapping took a median of 110 us through FFM and 106 us through {@code UnsafeBuffer.putBytes} (0.96x),
 *       out of it 114 and 115 us (1.01x); the lock's CAS and release 16 and 18 ns (1.09x); an index slot's
 *       volatile store and load about 20 ns either way, within the noise. Neither allocates. So Agrona does not beat
 *       plain FFM here, and using it would force {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED} on
 *       every user: it is not used. Chronicle Bytes was not measured on the mapping: it needs four flags, so it
 *       could not be used whatever it measured (its in-memory copy is measured beside {@code memcpy} in every
 *       report). Revisit if a release of either needs no flags.</li>
 *   <li>Waiting: Agrona's {@code BackoffIdleStrategy} (10 spins, 5 yields, parks from 1 us doubling to 1 ms)
 *       answered a two-thread hand-off in 10 to 21 us where the store lock's first back-off (200 spins, yields to
 *       2000, then 50 us parks) took 13 to 129 us, with variance as large as the figures. Under lock contention
 *       between writer processes ({@code ShmContentionBenchmark}: 2 and 4 JVMs putting and removing 4 KiB values
 *       in one store, 2 vCPUs, five or six interleaved runs of each) Agrona's parameters gave 1.5x the throughput
 *       of the first back-off with 2 writers and 1.8x with 4, and a quarter of its p99 with 2 (1.4 against
 *       6.0 us), at the cost of a longer rare wait (p99.9 with 4 writers 156 to 567 us against 45 to 227 us). The
 *       lock now uses them, written out in {@code ShmLock.lock()}, which needs no library; the figures are
 *       there.</li>
 * </ul>
 *
 * <h2>Measured</h2>
 * {@code ShmCrossProcessBenchmark} in the benchmarks module puts a 4 MiB layer in one JVM and drop-selects it in
 * another ({@code getInto} and {@code remove}), beside two {@code MemorySegment.copy} calls of the same size in
 * the same run: 1.20x and 1.33x that floor (medians 308 and 359 us against 256 and 270 us, 2 vCPUs at load 1.3 to
 * 1.9; the goal then: at most 1.5x) with the peer spinning on a shared word for its next command. Of a hand-over,
 * the put took 130 us, the peer's {@code getInto} 147 us and its {@code remove} 3.3 us: the copies and little else.
 * Woken through a pipe instead, the same hand-over took 1.75x and 2.03x the floor: on a VM, waking a process whose vCPU
 * went idle during a 4 MiB copy costs 70 to 220 us, which any store's consumer pays when it sleeps. Both processes
 * allocate nothing per hand-over in steady state. Those figures are of 2 December, before the split into parts,
 * claim and view, and the size check; the goal is now at most 1.2x (issue 17). {@code claimThenPeerViewSelect} is the
 * same hand-over through claim and view: this JVM claims the layer's bytes and copies the layer into them, the peer
 * views the value in place and copies it out, so the copies are the same two with no staging on either side. Its
 * smoke runs so far (5 December, load 3 to 4 on the 2 vCPUs) measured the scheduler, not the store: the spinning
 * peer found no free vCPU, and even the two-core floor took 8 ms; they are to be measured on a quiet machine. The
 * numbers, the load and the allocation analysis are in {@code benchmarks/README.md}.
 *
 * <p>The size check (an {@code fstat} per call; {@code RandomAccessFile.length()}, which allocates nothing and, unlike
 * a channel, is not closed by an interrupt) costs 0.25 to 0.35 us per call on the project's VM: a 4 KiB put, get
 * and remove took medians of 480 to 520, 430 to 520 and 650 to 670 ns against 240 to 300, 160 to 270 and 410 to
 * 460 ns without it (three interleaved runs each of 7 rounds of 300,000, load 4 to 5). For a 4 MiB layer (a 100 us
 * copy) the three or four calls of a claim or a view and its release come to about 1%.
 *
 * <p>The first put into pages of the file that a process has not touched yet pays a page fault per 4 KiB (20 to 40
 * us each on the project's VM: 20 to 42 ms for 4 MiB against 0.3 to 0.55 ms into reused pages). Freeing an entry
 * points the next allocation at the run it freed, so steady state stays on touched pages. No prefault option is
 * offered: neither touching the pages through another mapping nor {@code madvise(MADV_POPULATE_WRITE)} removed
 * most of that cost there.
 *
 * <p>The event ring's cost (a put then a remove of a 4 KiB value under a 60-byte key, one thread, 7 rounds of
 * 300,000, medians of the rounds, three runs of each build interleaved, load 7 to 10): a put took 330, 514 and
 * 355 ns against 289, 311 and 302 ns before the ring (layout version 1), a remove 510, 621 and 545 ns against 476,
 * 499 and 489 ns: about 40 ns each in the two quiet runs, the record's cache lines and stores; nothing against a
 * 4 MiB layer's 100 us copy.
 *
 * <h2>Writers in several processes</h2>
 * {@code ShmContentionBenchmark} runs 1, 2 and 4 writer JVMs at once, each putting and removing its own key.
 * With 4 KiB values the lock is held for most of each operation, so writers serialize: 2 and 4 writers together
 * did 0.9x to 1.2x and 0.7x to 1.05x the operations of one (medians 1.05 and 0.95 million a second against 1.09),
 * with the p50 unchanged (0.75 us) and the p99 from 0.8 to 1.6 us alone to 1.3 to 1.5 us with 2 and 1.2 to 5.2 us
 * with 4. With 4 MiB values the copies, which run outside the lock, proceed in parallel: 2 writers moved 1.9x to
 * 2x what one did, at the same p50 (100 us); 4 writers on 2 vCPUs the same as 2, with a p99 of 4.3 ms, the
 * scheduler's time slice. The tables and the load are in {@code benchmarks/README.md}.
 *
 * <h2>Not measured yet</h2>
 * Value sizes from 4 KiB to 16 MiB with 1 and 4 threads and keys of 32 to 250 bytes (the report covers one layer
 * of each model preset, one thread, one key); a Chronicle Map put/get of the same sizes; puts into a full store
 * (eviction cost); readers racing writers across processes (only writers were measured together); lock contention
 * on more than 2 cores, where a spinning waiter does not take a core from the holder.
 */
package dev.kvconnector.store.shm;
