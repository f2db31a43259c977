package dev.kvconnector.events;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * Reads messages of vLLM's KV-event wire format ({@link VllmKvEventCodec} has the format) into arrays it reuses, for a
 * subscriber that takes many messages a second: once its arrays have grown to the largest message, reading one
 * allocates nothing unless its topic frame changed or a medium is new. An event is read by its index,
 * {@code 0 <= i < size()}; {@link #hashKey(int)} gives a chunk hash as a 64-bit key, and {@link #toBatch()} the
 * records {@link VllmKvEventCodec#decode} returns, which it builds with a reader.
 *
 * <p>{@link #read} takes a whole message or nothing: a malformed one throws, and the reader then holds no message.
 * Not thread-safe: one per reading thread; what it returns describes the last message read, until the next.
 *
 * <p>Over 400 lines because it is one parser, of both of vLLM's forms (array-like structs and maps), writing into the
 * arrays it reuses; split up, each part would reach into the same arrays.
 */
public final class KvEventReader {
    /** What an event says, as vLLM's tags do. */
    public enum Kind {
        /** {@code BlockStored}: a {@link KvEvent.Stored} per block hash. */
        STORED,
        /** {@code BlockRemoved}: a {@link KvEvent.Removed} per block hash. */
        REMOVED,
        /** {@code AllBlocksCleared}: a {@link KvEvent.AllCleared}. */
        ALL_CLEARED
    }

    private static final HexFormat HEX = HexFormat.of();
    private static final byte[] BLOCK_STORED = ascii("BlockStored");
    private static final byte[] BLOCK_REMOVED = ascii("BlockRemoved");
    private static final byte[] ALL_BLOCKS_CLEARED = ascii("AllBlocksCleared");
    private static final byte[] TYPE = ascii("type");
    private static final byte[] BLOCK_HASHES = ascii("block_hashes");
    private static final byte[] PARENT_BLOCK_HASH = ascii("parent_block_hash");
    private static final byte[] BLOCK_SIZE = ascii("block_size");
    private static final byte[] MEDIUM = ascii("medium");
    private static final byte[] TS = ascii("ts");
    private static final byte[] EVENTS = ascii("events");
    /** Distinct media remembered, so that each is one {@link String} however often it comes. */
    private static final int MEDIA = 16;
    private static final Kind[] KINDS = Kind.values();
    private static final long FNV_OFFSET = 0xcbf29ce484222325L;
    private static final long FNV_PRIME = 0x100000001b3L;

    private final MsgPack.Reader r = new MsgPack.Reader(new byte[0]);
    private String instance;
    private byte[] topic;
    private KvEventSource source;
    private long sequence;
    private double timestampSeconds;
    private int size;
    private byte[] kinds = new byte[64];
    /** Each event's hash, and its parent's, as offset and length in {@link #pool}; a parent of length -1 is none. */
    private int[] hashAt = new int[64];
    private int[] hashLength = new int[64];
    private int[] parentAt = new int[64];
    private int[] parentLength = new int[64];
    private int[] tokens = new int[64];
    private String[] media = new String[64];
    /** The hash bytes of the message, an integer hash as its 8 bytes big-endian. */
    private byte[] pool = new byte[64 * 32];
    private int poolLength;
    /** Where the hashes of the event being read start in {@link #pool} (offset, length), until it is expanded. */
    private int[] blockAt = new int[64];
    private int[] blockLength = new int[64];
    private final byte[][] mediumBytes = new byte[MEDIA][];
    private final String[] mediumNames = new String[MEDIA];
    private int mediaKnown;

    /** A reader; it grows its arrays as messages need. */
    public KvEventReader() {
    }

    /**
     * Reads one message from {@code instance}: its three frames.
     *
     * @throws MalformedEventException when a frame does not decode; nothing of the message is then held
     */
    public void read(String instance, byte[] topicFrame, byte[] sequenceFrame, byte[] payload)
            throws MalformedEventException {
        size = 0;
        poolLength = 0;
        KvEventSource s = instance.equals(this.instance) && Arrays.equals(topicFrame, topic) ? source
                : VllmKvEventCodec.parseTopic(instance, topicFrame);
        long seq = VllmKvEventCodec.readSequence(sequenceFrame);
        if (payload == null) {
            throw new MalformedEventException("no payload frame");
        }
        try {
            batch(r.reset(payload));
        } catch (MalformedEventException e) {
            size = 0;
            throw e;
        }
        this.instance = instance;
        this.topic = topicFrame;
        this.source = s;
        this.sequence = seq;
    }

    private void batch(MsgPack.Reader r) throws MalformedEventException {
        double ts = 0;
        if (r.peek() == MsgPack.Kind.MAP) {
            boolean sawEvents = false;
            for (int i = r.mapHeader(); i > 0; i--) {
                int n = r.stringBytes();
                if (r.spanIs(n, TS)) {
                    ts = r.number();
                } else if (r.spanIs(n, EVENTS)) {
                    sawEvents = true;
                    events(r);
                } else {
                    r.skip();
                }
            }
            if (!sawEvents) {
                throw new MalformedEventException("batch without events");
            }
        } else {
            int fields = r.arrayHeader();
            if (fields < 2) {
                throw new MalformedEventException("batch of " + fields + " fields (need ts and events)");
            }
            ts = r.number();
            events(r);
            for (int i = 2; i < fields; i++) {
                r.skip();
            }
        }
        if (!r.atEnd()) {
            throw new MalformedEventException("bytes after the batch");
        }
        timestampSeconds = ts;
    }

    private void events(MsgPack.Reader r) throws MalformedEventException {
        for (int i = r.arrayHeader(); i > 0; i--) {
            if (r.peek() == MsgPack.Kind.MAP) {
                mapEvent(r);
            } else {
                arrayEvent(r);
            }
        }
    }

    private void arrayEvent(MsgPack.Reader r) throws MalformedEventException {
        int fields = r.arrayHeader();
        if (fields < 1) {
            throw new MalformedEventException("event without a tag");
        }
        int n = r.stringBytes();
        int read = 1;
        if (r.spanIs(n, BLOCK_STORED)) {
            if (fields < 5) {
                throw new MalformedEventException("BlockStored of " + fields + " fields (need at least 5)");
            }
            int blocks = hashes(r);
            int parent = -1;
            int parentLen = -1;
            if (!r.tryNil()) {
                parentLen = hash(r);
                parent = poolLength - parentLen;
            }
            r.skip();
            int blockSize = (int) r.integer();
            read = 5;
            String medium = null;
            if (fields >= 7) {
                r.skip();
                medium = medium(r);
                read = 7;
            }
            expand(Kind.STORED, blocks, parent, parentLen, blockSize, medium);
        } else if (r.spanIs(n, BLOCK_REMOVED)) {
            if (fields < 2) {
                throw new MalformedEventException("BlockRemoved without hashes");
            }
            int blocks = hashes(r);
            String medium = null;
            read = 2;
            if (fields >= 3) {
                medium = medium(r);
                read = 3;
            }
            expand(Kind.REMOVED, blocks, -1, -1, -1, medium);
        } else if (r.spanIs(n, ALL_BLOCKS_CLEARED)) {
            add(Kind.ALL_CLEARED, -1, -1, -1, -1, -1, null);
        } else {
            throw new MalformedEventException("unknown event tag '" + spanString(r, n) + "'");
        }
        for (int i = read; i < fields; i++) {
            r.skip();
        }
    }

    private void mapEvent(MsgPack.Reader r) throws MalformedEventException {
        Kind kind = null;
        String unknownType = null;
        int blocks = -1;
        int parent = -1;
        int parentLen = -1;
        String medium = null;
        int blockSize = -1;
        for (int i = r.mapHeader(); i > 0; i--) {
            int n = r.stringBytes();
            if (r.spanIs(n, TYPE)) {
                int t = r.stringBytes();
                kind = r.spanIs(t, BLOCK_STORED) ? Kind.STORED : r.spanIs(t, BLOCK_REMOVED) ? Kind.REMOVED
                        : r.spanIs(t, ALL_BLOCKS_CLEARED) ? Kind.ALL_CLEARED : null;
                unknownType = kind == null ? spanString(r, t) : null;
            } else if (r.spanIs(n, BLOCK_HASHES)) {
                blocks = hashes(r);
            } else if (r.spanIs(n, PARENT_BLOCK_HASH)) {
                if (r.tryNil()) {
                    parent = -1;
                    parentLen = -1;
                } else {
                    parentLen = hash(r);
                    parent = poolLength - parentLen;
                }
            } else if (r.spanIs(n, BLOCK_SIZE)) {
                blockSize = (int) r.integer();
            } else if (r.spanIs(n, MEDIUM)) {
                medium = medium(r);
            } else {
                r.skip();
            }
        }
        if (kind == null) {
            throw new MalformedEventException(unknownType == null ? "event without a type"
                    : "unknown event type '" + unknownType + "'");
        }
        switch (kind) {
            case STORED -> {
                if (blocks < 0 || blockSize < 0) {
                    throw new MalformedEventException("BlockStored without block_hashes or block_size");
                }
                expand(Kind.STORED, blocks, parent, parentLen, blockSize, medium);
            }
            case REMOVED -> {
                if (blocks < 0) {
                    throw new MalformedEventException("BlockRemoved without block_hashes");
                }
                expand(Kind.REMOVED, blocks, -1, -1, -1, medium);
            }
            case ALL_CLEARED -> add(Kind.ALL_CLEARED, -1, -1, -1, -1, -1, null);
        }
    }

    private static String spanString(MsgPack.Reader r, int n) {
        return new String(r.buffer(), r.spanStart(), n, StandardCharsets.UTF_8);
    }

    /**
     * One event per block read by the last {@link #hashes}: a stored block's parent is the block before it, the
     * first one's {@code parent} (offset and length in the pool, -1 for none).
     */
    private void expand(Kind kind, int blocks, int parent, int parentLen, int blockSize, String medium) {
        for (int b = 0; b < blocks; b++) {
            add(kind, blockAt[b], blockLength[b], parent, parentLen, blockSize, medium);
            if (kind == Kind.STORED) {
                parent = blockAt[b];
                parentLen = blockLength[b];
            }
        }
    }

    private void add(Kind kind, int at, int length, int parent, int parentLen, int blockSize, String medium) {
        if (size == kinds.length) {
            int n = 2 * size;
            kinds = Arrays.copyOf(kinds, n);
            hashAt = Arrays.copyOf(hashAt, n);
            hashLength = Arrays.copyOf(hashLength, n);
            parentAt = Arrays.copyOf(parentAt, n);
            parentLength = Arrays.copyOf(parentLength, n);
            tokens = Arrays.copyOf(tokens, n);
            media = Arrays.copyOf(media, n);
        }
        kinds[size] = (byte) kind.ordinal();
        hashAt[size] = at;
        hashLength[size] = length;
        parentAt[size] = parent;
        parentLength[size] = parentLen;
        tokens[size] = blockSize;
        media[size] = medium;
        size++;
    }

    /** Reads an array of block hashes into the pool; their spans go to {@link #blockAt}. Returns how many. */
    private int hashes(MsgPack.Reader r) throws MalformedEventException {
        int n = r.arrayHeader();
        if (n > blockAt.length) {
            blockAt = new int[Math.max(n, 2 * blockAt.length)];
            blockLength = new int[blockAt.length];
        }
        for (int i = 0; i < n; i++) {
            blockLength[i] = hash(r);
            blockAt[i] = poolLength - blockLength[i];
        }
        return n;
    }

    /** Appends one block hash to the pool (bytes as they are, an integer as 8 bytes big-endian); returns its length. */
    private int hash(MsgPack.Reader r) throws MalformedEventException {
        return switch (r.peek()) {
            case BINARY -> {
                int n = r.binaryBytes();
                ensurePool(n);
                System.arraycopy(r.buffer(), r.spanStart(), pool, poolLength, n);
                poolLength += n;
                yield n;
            }
            case INTEGER -> {
                long v = r.integer();
                ensurePool(8);
                for (int i = 0; i < 8; i++) {
                    pool[poolLength++] = (byte) (v >>> (56 - 8 * i));
                }
                yield 8;
            }
            default -> throw new MalformedEventException("a block hash is neither bytes nor an integer");
        };
    }

    private void ensurePool(int n) {
        if (poolLength + n > pool.length) {
            pool = Arrays.copyOf(pool, Math.max(2 * pool.length, poolLength + n));
        }
    }

    /** A medium (nil or a string) as one shared {@link String} per distinct value. */
    private String medium(MsgPack.Reader r) throws MalformedEventException {
        if (r.tryNil()) {
            return null;
        }
        int n = r.stringBytes();
        for (int i = 0; i < mediaKnown; i++) {
            if (r.spanIs(n, mediumBytes[i])) {
                return mediumNames[i];
            }
        }
        String name = spanString(r, n);
        int slot = mediaKnown < MEDIA ? mediaKnown++ : Math.floorMod(name.hashCode(), MEDIA);
        mediumBytes[slot] = Arrays.copyOfRange(r.buffer(), r.spanStart(), r.spanStart() + n);
        mediumNames[slot] = name;
        return name;
    }

    /** What the last message's topic frame said about its publisher. */
    public KvEventSource source() {
        return source;
    }

    /** The last message's sequence number. */
    public long sequence() {
        return sequence;
    }

    /** When the publisher sent the last message, seconds since the epoch (vLLM's {@code ts}). */
    public double timestampSeconds() {
        return timestampSeconds;
    }

    /** Events in the last message, one per block hash. */
    public int size() {
        return size;
    }

    /** Event {@code i}'s kind. */
    public Kind kind(int i) {
        return KINDS[kinds[check(i)]];
    }

    /** Event {@code i}'s chunk hash as {@link #hashKey(String)} keys it; 0 for {@link Kind#ALL_CLEARED}. */
    public long hashKey(int i) {
        check(i);
        return hashLength[i] < 0 ? 0 : hashKey(pool, hashAt[i], hashLength[i]);
    }

    /** Event {@code i}'s chunk hash in lower-case hex, or null for {@link Kind#ALL_CLEARED}; allocates. */
    public String hashHex(int i) {
        check(i);
        return hashLength[i] < 0 ? null : HEX.formatHex(pool, hashAt[i], hashAt[i] + hashLength[i]);
    }

    /** Event {@code i}'s medium (a store URI, {@code GPU}, ...), or null when it has none. */
    public String medium(int i) {
        return media[check(i)];
    }

    private int check(int i) {
        return Objects.checkIndex(i, size);
    }

    /**
     * A chunk hash as a 64-bit key, the way routers key their indexes (Dynamo's and llm-d's block hashes are 64-bit
     * too): its first 16 hex digits, which for a hash of 8 bytes or more are its first 8 bytes, big-endian, and for
     * an integer hash (older vLLM) the integer. A shorter hash, or a name that is not hex (an in-process publisher may
     * name its chunks as it likes), is keyed by the 64-bit FNV-1a of its characters. Distinct chunks share a key with
     * a chance of about 2^-64 per pair; a router that met such a pair would at worst predict a hit that is a miss.
     */
    public static long hashKey(String hash) {
        if (hash.length() >= 16) {
            long v = 0;
            int i = 0;
            for (; i < 16; i++) {
                int d = Character.digit(hash.charAt(i), 16);
                if (d < 0) {
                    break;
                }
                v = (v << 4) | d;
            }
            if (i == 16) {
                return v;
            }
        }
        long h = FNV_OFFSET;
        for (int i = 0; i < hash.length(); i++) {
            h = (h ^ hash.charAt(i)) * FNV_PRIME;
        }
        return h;
    }

    /** {@link #hashKey(String)} of the hex of {@code length} bytes at {@code at}, without making the hex. */
    private static long hashKey(byte[] b, int at, int length) {
        if (length >= 8) {
            long v = 0;
            for (int i = 0; i < 8; i++) {
                v = (v << 8) | (b[at + i] & 0xff);
            }
            return v;
        }
        long h = FNV_OFFSET;
        for (int i = 0; i < length; i++) {
            h = (h ^ Character.forDigit((b[at + i] >> 4) & 0xf, 16)) * FNV_PRIME;
            h = (h ^ Character.forDigit(b[at + i] & 0xf, 16)) * FNV_PRIME;
        }
        return h;
    }

    /**
     * The events of a payload as its batch counts them (a {@code BlockStored} of several blocks counts once), read
     * from the batch's header alone: what a subscriber that drops a message unread counts as dropped. -1 when the
     * header does not decode.
     */
    public static int countEvents(byte[] payload) {
        if (payload == null) {
            return -1;
        }
        MsgPack.Reader r = new MsgPack.Reader(payload);
        try {
            if (r.peek() == MsgPack.Kind.MAP) {
                for (int i = r.mapHeader(); i > 0; i--) {
                    int n = r.stringBytes();
                    if (r.spanIs(n, EVENTS)) {
                        return r.arrayHeader();
                    }
                    r.skip();
                }
                return -1;
            }
            if (r.arrayHeader() < 2) {
                return -1;
            }
            r.skip();
            return r.arrayHeader();
        } catch (MalformedEventException e) {
            return -1;
        }
    }

    /** The last message as records, each event carrying its epoch and sequence. */
    public KvEventBatch toBatch() {
        List<KvEvent> events = new ArrayList<>(size);
        long epoch = source.epoch();
        String inst = source.instance();
        for (int i = 0; i < size; i++) {
            events.add(switch (kind(i)) {
                case STORED -> new KvEvent.Stored(epoch, sequence, inst, media[i], null, hashHex(i),
                        parentLength[i] < 0 ? null : HEX.formatHex(pool, parentAt[i], parentAt[i] + parentLength[i]),
                        tokens[i], -1);
                case REMOVED -> new KvEvent.Removed(epoch, sequence, inst, media[i], hashHex(i),
                        RemovalReason.REMOVED);
                case ALL_CLEARED -> new KvEvent.AllCleared(epoch, sequence, inst);
            });
        }
        return new KvEventBatch(source, sequence, timestampSeconds, events);
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }
}
