package dev.kvconnector.valkey.resp;

import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads RESP2 and RESP3 replies from a channel. Line-shaped parts (type bytes, lengths, status lines, small
 * replies) go through one reused direct buffer; the payload of a bulk reply that is read into a caller's segment
 * goes straight into that segment's memory, without an intermediate copy, once what the buffer already holds is
 * used.
 *
 * <p>Every length and count a server sends is checked before it is acted on: a bulk longer than
 * {@code maxReplyBytes}, an aggregate with more than {@code maxElements} members (in total, nested included) and
 * negative lengths other than the RESP2 null are {@code PROTOCOL_ERROR}s. So a hostile or broken server can make
 * this reader neither allocate nor loop without bound.
 *
 * <p>Error replies ({@code -ERR ...}, RESP3 {@code !}) are not exceptions here: the methods return
 * {@link #REPLY_ERROR} and {@link #lastError()} holds the message, so that a pipeline can read every reply before
 * the caller decides. Not thread-safe: one per connection.
 *
 * <p>Over 400 lines because RESP2 and RESP3 replies share one buffer and one set of length checks, which every
 * reply type's reader relies on.
 */
public final class RespReader {
    /** Returned when the reply was an error reply; see {@link #lastError()}. Never a valid length or count. */
    public static final long REPLY_ERROR = Long.MIN_VALUE;
    /** Payloads at least this long (bytes) are read straight into a native destination, bypassing the buffer. */
    private static final int DIRECT_READ_MIN_BYTES = 8 * 1024;
    private static final int MAX_TEXT_BYTES = 1 << 20;
    private static final int MAX_ERROR_BYTES = 4096;

    private ReadableByteChannel ch;
    private final ByteBuffer rb;
    private final MemorySegment rseg;
    private final long maxReplyBytes;
    private final int maxElements;
    private final Endpoint endpoint;
    private final InFlight inFlight;
    private final SegmentViews views = new SegmentViews();
    private String lastError;

    /**
     * @param ch the channel replies come from (a connected {@code SocketChannel}, or any byte source)
     * @param bufferBytes size of the reused direct read buffer in bytes; also the longest line accepted
     * @param maxReplyBytes the largest bulk reply accepted, in bytes
     * @param maxElements the most members accepted in one aggregate reply, nested members included
     * @param endpoint the server, for messages
     * @param inFlight the operation in progress, for messages and the watchdog
     */
    public RespReader(ReadableByteChannel ch, int bufferBytes, long maxReplyBytes, int maxElements,
                      Endpoint endpoint, InFlight inFlight) {
        this.ch = ch;
        this.rb = ByteBuffer.allocateDirect(bufferBytes).flip();
        this.rseg = MemorySegment.ofBuffer(rb.duplicate().clear());
        this.maxReplyBytes = maxReplyBytes;
        this.maxElements = maxElements;
        this.endpoint = endpoint;
        this.inFlight = inFlight;
    }

    /** Binds a new channel (after a reconnect) and drops anything buffered from the old one. */
    void bind(ReadableByteChannel channel) {
        this.ch = channel;
        rb.clear().flip();
        lastError = null;
    }

    /** The message of the last error reply (type byte stripped), or null. */
    public String lastError() {
        return lastError;
    }

    /** Whether bytes are buffered that no reply has consumed yet. */
    public boolean hasBufferedBytes() {
        return rb.hasRemaining();
    }

    /**
     * Reads a bulk reply (GET) into {@code dst} from offset 0.
     *
     * @return a {@link GetResult} code: the length on a hit; {@link GetResult#MISS} for a null reply; a too-small
     *     code when {@code dst} is shorter than the value (the payload is then read and discarded, so the
     *     connection stays usable); or {@link #REPLY_ERROR}
     */
    public long readBulkInto(MemorySegment dst) {
        int t = nextReplyType();
        switch (t) {
            case '$' -> {
                long len = readLength(t);
                if (len < 0) {
                    return GetResult.MISS;
                }
                if (len > dst.byteSize()) {
                    skipBytes(len);
                    expectCrlf();
                    return GetResult.tooSmall(len);
                }
                readPayload(dst, len);
                expectCrlf();
                return len;
            }
            case '_' -> {
                expectEmptyLine();
                return GetResult.MISS;
            }
            case '-', '!' -> {
                readErrorBody(t);
                return REPLY_ERROR;
            }
            default -> throw unexpected(t, "a bulk string");
        }
    }

    /**
     * Reads a status-like reply (SET, AUTH, SELECT, PING).
     *
     * @return 1 for a simple string or a non-null bulk string, 0 for a null reply (SET NX that did not set),
     *     or {@link #REPLY_ERROR}
     */
    public long readStatus() {
        int t = nextReplyType();
        switch (t) {
            case '+' -> {
                skipLine();
                return 1;
            }
            case '$' -> {
                long len = readLength(t);
                if (len < 0) {
                    return 0;
                }
                skipBytes(len);
                expectCrlf();
                return 1;
            }
            case '_' -> {
                expectEmptyLine();
                return 0;
            }
            case '-', '!' -> {
                readErrorBody(t);
                return REPLY_ERROR;
            }
            default -> throw unexpected(t, "a status reply");
        }
    }

    /** Reads an integer reply; returns it, or {@link #REPLY_ERROR}. */
    public long readInteger() {
        int t = nextReplyType();
        switch (t) {
            case ':' -> {
                return readLineLong();
            }
            case '-', '!' -> {
                readErrorBody(t);
                return REPLY_ERROR;
            }
            default -> throw unexpected(t, "an integer");
        }
    }

    /**
     * Reads a text reply (INFO: a bulk string in RESP2, a verbatim string in RESP3) of at most 1 MiB.
     *
     * @return the text; "" for a null reply; null for an error reply (see {@link #lastError()})
     */
    public String readText() {
        int t = nextReplyType();
        switch (t) {
            case '+' -> {
                return readLineString();
            }
            case '$', '=' -> {
                long len = readLength(t);
                if (len < 0) {
                    return "";
                }
                if (len > MAX_TEXT_BYTES) {
                    throw endpoint.protocolError(inFlight, "a text reply of " + len + " bytes exceeds "
                            + MAX_TEXT_BYTES + " bytes");
                }
                String s = readString((int) len);
                expectCrlf();
                if (t == '=') {
                    // A verbatim string starts with its 3-letter format and a colon, such as "txt:".
                    return s.length() >= 4 && s.charAt(3) == ':' ? s.substring(4) : s;
                }
                return s;
            }
            case '_' -> {
                expectEmptyLine();
                return "";
            }
            case '-', '!' -> {
                readErrorBody(t);
                return null;
            }
            default -> throw unexpected(t, "a text reply");
        }
    }

    /**
     * Reads a flat map of strings: a RESP2 array of name/value pairs or a RESP3 map (CONFIG GET).
     *
     * @return the pairs in order, or null for an error reply
     */
    public Map<String, String> readStringMap() {
        int t = nextReplyType();
        long pairs;
        switch (t) {
            case '*' -> {
                long n = readCount(t);
                if (n < 0) {
                    return Map.of();
                }
                if ((n & 1) != 0) {
                    throw endpoint.protocolError(inFlight, "an array of " + n + " members cannot hold name/value "
                            + "pairs");
                }
                pairs = n / 2;
            }
            case '%' -> pairs = readCount(t);
            case '-', '!' -> {
                readErrorBody(t);
                return null;
            }
            default -> throw unexpected(t, "an array or map of strings");
        }
        Map<String, String> m = new LinkedHashMap<>();
        long textBytes = 0;
        for (long i = 0; i < pairs; i++) {
            String k = readText();
            String v = readText();
            if (k == null || v == null) {
                throw endpoint.protocolError(inFlight, "an error reply nested inside a map");
            }
            textBytes += k.length() + v.length();
            if (textBytes > MAX_TEXT_BYTES) {
                throw endpoint.protocolError(inFlight, "a map of strings longer than " + MAX_TEXT_BYTES + " bytes");
            }
            m.put(k, v);
        }
        return m;
    }

    /**
     * Reads one reply as a tree, for small control replies such as CLUSTER SLOTS: aggregates become lists (a map
     * becomes its keys and values alternating), integers {@code Long}s, everything else {@code String}s, nulls
     * null. Nesting deeper than 8 levels, more than {@code maxElements} members or more than 1 MiB of text is a
     * protocol error.
     *
     * @return the tree; null for a null reply, and for an error reply, which {@link #lastError()} then holds
     *     (call {@link #clearError()} before, to tell them apart)
     */
    public Object readTree() {
        int t = nextReplyType();
        if (t == '-' || t == '!') {
            readErrorBody(t);
            return null;
        }
        long[] budget = {maxElements, MAX_TEXT_BYTES};
        return treeAfter(t, 0, budget);
    }

    /** Forgets the last error message. */
    public void clearError() {
        lastError = null;
    }

    private Object treeAfter(int t, int depth, long[] budget) {
        if (depth > 8) {
            throw endpoint.protocolError(inFlight, "a reply nested deeper than 8 levels");
        }
        if (--budget[0] < 0) {
            throw endpoint.protocolError(inFlight, "a reply with more than " + maxElements + " members");
        }
        switch (t) {
            case ':' -> {
                return readLineLong();
            }
            case '$', '=', '!' -> {
                long len = readLength(t);
                if (len < 0) {
                    return null;
                }
                budget[1] -= len;
                if (budget[1] < 0) {
                    throw endpoint.protocolError(inFlight, "a reply with more than " + MAX_TEXT_BYTES
                            + " bytes of text");
                }
                String s = readString((int) len);
                expectCrlf();
                return s;
            }
            case '+', '-', ',', '(', '#' -> {
                return readLineString();
            }
            case '_' -> {
                expectEmptyLine();
                return null;
            }
            case '*', '~', '%', '>', '|' -> {
                long n = readCount(t);
                if (n < 0) {
                    return null;
                }
                long members = t == '%' || t == '|' ? 2 * n : n;
                if (members > budget[0]) {
                    throw endpoint.protocolError(inFlight, "a reply with more than " + maxElements + " members");
                }
                List<Object> list = new ArrayList<>((int) members);
                for (long i = 0; i < members; i++) {
                    list.add(treeAfter(readType(), depth + 1, budget));
                }
                return list;
            }
            default -> throw endpoint.protocolError(inFlight, "unknown type byte " + describe(t));
        }
    }

    /**
     * Reads and discards one reply of any type, nested aggregates included, without recursion.
     *
     * @return 0, or {@link #REPLY_ERROR} when the reply was an error (see {@link #lastError()})
     */
    public long skipReply() {
        int t = nextReplyType();
        if (t == '-' || t == '!') {
            readErrorBody(t);
            return REPLY_ERROR;
        }
        skipValue(t);
        return 0;
    }

    /** The type byte of the next reply, after skipping RESP3 push messages and attributes. */
    private int nextReplyType() {
        while (true) {
            int t = readType();
            if (t == '>') {
                skipValue(t);
            } else if (t == '|') {
                long n = readCount(t);
                if (n > 0) {
                    skipMembers(2 * n);
                }
            } else {
                return t;
            }
        }
    }

    private void skipValue(int type) {
        skipMembers(pendingAfter(type));
    }

    /** Skips {@code pending} values, counting nested members against the element limit. */
    private void skipMembers(long pending) {
        long seen = 0;
        while (pending > 0) {
            if (++seen > maxElements || pending > maxElements) {
                throw endpoint.protocolError(inFlight, "an aggregate reply has more than " + maxElements
                        + " members in total");
            }
            pending = pending - 1 + pendingAfter(readType());
        }
    }

    /** Consumes the body of a value of type {@code t}; returns how many nested values follow it. */
    private long pendingAfter(int t) {
        switch (t) {
            case '+', '-', ':', ',', '(', '#' -> {
                skipLine();
                return 0;
            }
            case '_' -> {
                expectEmptyLine();
                return 0;
            }
            case '$', '!', '=' -> {
                long len = readLength(t);
                if (len >= 0) {
                    skipBytes(len);
                    expectCrlf();
                }
                return 0;
            }
            case '*', '~', '>' -> {
                return Math.max(0, readCount(t));
            }
            case '%' -> {
                return 2 * Math.max(0, readCount(t));
            }
            case '|' -> {
                // An attribute map comes before the value it describes, which still follows.
                return 2 * Math.max(0, readCount(t)) + 1;
            }
            default -> throw endpoint.protocolError(inFlight, "unknown type byte " + describe(t));
        }
    }

    private KVException unexpected(int t, String expected) {
        return endpoint.protocolError(inFlight, "expected " + expected + ", got type byte " + describe(t));
    }

    private static String describe(int t) {
        return t >= 0x21 && t < 0x7f ? "'" + (char) t + "'" : String.format("0x%02x", t);
    }

    private void readErrorBody(int t) {
        if (t == '-') {
            lastError = readLineString();
            return;
        }
        long len = readLength(t);
        if (len < 0) {
            lastError = "";
            return;
        }
        int keep = (int) Math.min(len, MAX_ERROR_BYTES);
        lastError = readString(keep);
        skipBytes(len - keep);
        expectCrlf();
    }

    private long readLength(int t) {
        long v = readLineLong();
        if (v < -1) {
            throw endpoint.protocolError(inFlight, "negative length " + v + " for type " + describe(t));
        }
        if (v > maxReplyBytes) {
            throw endpoint.protocolError(inFlight, "a reply of " + v + " bytes exceeds max-reply="
                    + maxReplyBytes + " bytes");
        }
        return v;
    }

    private long readCount(int t) {
        long v = readLineLong();
        if (v < -1) {
            throw endpoint.protocolError(inFlight, "negative count " + v + " for type " + describe(t));
        }
        if (v > maxElements) {
            throw endpoint.protocolError(inFlight, "an aggregate of " + v + " members exceeds the limit of "
                    + maxElements);
        }
        return v;
    }

    private int readType() {
        ensure(1);
        return rb.get() & 0xff;
    }

    private long readLineLong() {
        int end = findLineEnd();
        int p = rb.position();
        boolean neg = p < end && rb.get(p) == '-';
        int i = neg ? p + 1 : p;
        if (i == end || end - i > 18) {
            throw endpoint.protocolError(inFlight, "a number of " + (end - p) + " characters (expected 1 to 18 "
                    + "digits)");
        }
        long v = 0;
        for (; i < end; i++) {
            int d = rb.get(i) - '0';
            if (d < 0 || d > 9) {
                throw endpoint.protocolError(inFlight, "a non-digit byte " + describe(rb.get(i) & 0xff)
                        + " in a number");
            }
            v = v * 10 + d;
        }
        rb.position(end + 2);
        return neg ? -v : v;
    }

    private String readLineString() {
        int end = findLineEnd();
        int p = rb.position();
        byte[] b = new byte[Math.min(end - p, MAX_ERROR_BYTES)];
        rb.get(p, b);
        rb.position(end + 2);
        return new String(b, StandardCharsets.UTF_8);
    }

    private void skipLine() {
        rb.position(findLineEnd() + 2);
    }

    private void expectEmptyLine() {
        int end = findLineEnd();
        if (end != rb.position()) {
            throw endpoint.protocolError(inFlight, "a RESP3 null with a non-empty body");
        }
        rb.position(end + 2);
    }

    /** Index of the CR of the next CRLF at or after the position, filling the buffer as needed. */
    private int findLineEnd() {
        int scanned = 0;
        while (true) {
            int p = rb.position();
            int lim = rb.limit();
            for (int i = p + scanned; i < lim; i++) {
                byte b = rb.get(i);
                if (b == '\r') {
                    if (i + 1 == lim) {
                        scanned = i - p;
                        break;
                    }
                    if (rb.get(i + 1) != '\n') {
                        throw endpoint.protocolError(inFlight, "a CR not followed by LF in a reply line");
                    }
                    return i;
                } else if (b == '\n') {
                    throw endpoint.protocolError(inFlight, "a LF without CR in a reply line");
                }
                scanned = i - p + 1;
            }
            if (lim - p >= rb.capacity()) {
                throw endpoint.protocolError(inFlight, "a reply line longer than " + rb.capacity() + " bytes");
            }
            fill();
        }
    }

    private void expectCrlf() {
        ensure(2);
        if (rb.get() != '\r' || rb.get() != '\n') {
            throw endpoint.protocolError(inFlight, "a bulk payload not followed by CRLF (its length is wrong)");
        }
    }

    private String readString(int len) {
        byte[] b = new byte[len];
        int off = 0;
        while (off < len) {
            if (!rb.hasRemaining()) {
                fill();
            }
            int n = Math.min(rb.remaining(), len - off);
            rb.get(b, off, n);
            off += n;
        }
        return new String(b, StandardCharsets.UTF_8);
    }

    private void skipBytes(long len) {
        long left = len;
        while (left > 0) {
            if (!rb.hasRemaining()) {
                fill();
            }
            int n = (int) Math.min(rb.remaining(), left);
            rb.position(rb.position() + n);
            left -= n;
        }
    }

    private void readPayload(MemorySegment dst, long len) {
        long done = Math.min(rb.remaining(), len);
        MemorySegment.copy(rseg, rb.position(), dst, 0, done);
        rb.position(rb.position() + (int) done);
        if (done == len) {
            return;
        }
        if (dst.isNative() && len - done >= DIRECT_READ_MIN_BYTES) {
            readDirect(dst, done, len);
            return;
        }
        while (done < len) {
            fill();
            int n = (int) Math.min(rb.remaining(), len - done);
            MemorySegment.copy(rseg, rb.position(), dst, done, n);
            rb.position(rb.position() + n);
            done += n;
        }
    }

    /** Reads bytes [from, len) of the payload straight into {@code dst}'s memory; the buffer is empty now. */
    private void readDirect(MemorySegment dst, long from, long len) {
        long done = from;
        while (done < len) {
            ByteBuffer view;
            long chunk;
            if (dst.byteSize() <= Integer.MAX_VALUE) {
                chunk = len - done;
                view = views.of(dst);
                view.limit((int) len).position((int) done);
            } else {
                // A view is int-indexed; destinations over 2 GiB are read in 1 GiB slices.
                chunk = Math.min(len - done, 1L << 30);
                view = dst.asSlice(done, chunk).asByteBuffer();
            }
            int p0 = view.position();
            while (view.hasRemaining()) {
                if (read(view) < 0) {
                    throw endpoint.closedByPeer(inFlight, "mid-reply, after " + (done + view.position() - p0)
                            + " of " + len + " payload bytes");
                }
            }
            done += chunk;
        }
    }

    private void ensure(int n) {
        while (rb.remaining() < n) {
            fill();
        }
    }

    /** Compacts the buffer and reads at least one byte more, or fails. */
    private void fill() {
        rb.compact();
        try {
            int n = read(rb);
            if (n < 0) {
                throw endpoint.closedByPeer(inFlight, "while a reply was expected");
            }
        } finally {
            rb.flip();
        }
    }

    private int read(ByteBuffer b) {
        try {
            int n;
            do {
                n = ch.read(b);
            } while (n == 0 && b.hasRemaining());
            if (n > 0) {
                inFlight.progress();
            }
            return n;
        } catch (IOException e) {
            throw endpoint.ioFailure(inFlight, e);
        }
    }
}
