/**
 * The {@code shm:} store: byte objects in one memory-mapped file per store, shared by every process of one user on
 * one host. {@link dev.kvconnector.store.shm.ShmStore} describes the URI, the guarantees and the recovery of
 * crashed processes; {@code ShmLayout} the file format.
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
 *       Chronicle buffer crashes the JVM. So neither library can beat plain FFM here without forcing
 *       the flags, and neither is used. Revisit if a release of either needs no flags and the benchmarks below
 *       show it faster by more than their noise.</li>
 * </ul>
 *
 * <h2>What the benchmarks module should measure</h2>
 * All beside the plain {@code MemorySegment.copy} (memcpy) baseline, with {@code -prof gc} (expected 0 B/op):
 * <ul>
 *   <li>{@code put} and {@code getInto} latency and throughput for values of 4 KiB, 64 KiB, 1 MiB and 16 MiB (one
 *       layer's K and V), 1 and 4 threads, keys of 32, 128 and 250 bytes;</li>
 *   <li>the same copies through Agrona {@code UnsafeBuffer.putBytes/getBytes} and Chronicle {@code MappedBytes}
 *       over a file in {@code /dev/shm} (their flags only in that benchmark's JVM), and a Chronicle Map
 *       put/get of the same sizes;</li>
 *   <li>the uncontended lock round trip ({@code VarHandle} CAS and release on the mapped segment against Agrona
 *       {@code AtomicBuffer.compareAndSetLong}/{@code putLongOrdered});</li>
 *   <li>cross-process hand-off: one JVM puts, another polls {@code getInto}, latency from put to first hit;</li>
 *   <li>puts into a full store (eviction cost) and under 2 to 4 concurrent writer processes (lock contention).</li>
 * </ul>
 */
package dev.kvconnector.store.shm;
