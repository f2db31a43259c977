package dev.kvconnector.valkey.resp;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;

/**
 * Encodes RESP commands and writes them. Command headers, keys and small values are encoded into one reused direct
 * buffer; a large value from a native segment is not copied: once the bytes before it are written, it is written
 * from its own memory, then encoding continues with the CRLF after it. Commands accumulate until {@link #flush()},
 * so a pipeline of small commands leaves in one write.
 *
 * <p>A large value is its own {@code write(ByteBuffer)} call rather than an element of a gather write, because the
 * JDK's gather write ({@code sun.nio.ch.IOUtil.write(FileDescriptor, ByteBuffer[], ...)}) allocates a 40-byte
 * releaser for every buffer that views a {@code MemorySegment}, on every call, whereas a single-buffer write acquires
 * and releases the segment's session without allocating. That costs two more system calls per large value (the
 * header before it and the CRLF after it leave separately), which measured within noise for 4 MiB values (see
 * the module README), and keeps the steady-state put path free of allocation.
 *
 * <p>Keys are encoded as UTF-8 without allocation when they are ASCII. Not thread-safe: one per connection.
 */
public final class RespWriter {
    /**
     * Values up to this many bytes are copied into the command buffer, where they leave in the same write as their
     * header: a copy of 16 KiB costs less than the extra system calls of a separate write.
     */
    private static final int INLINE_VALUE_MAX_BYTES = 16 * 1024;
    /** Room the longest header of one bulk string needs: '$', 19 digits, CRLF. */
    private static final int BULK_HEADER_MAX = 24;
    /** Values larger than this (bytes) leave in slices: a {@code ByteBuffer} view is int-indexed. */
    private static final long MAX_VIEW_BYTES = 1L << 30;

    private WritableByteChannel ch;
    private final ByteBuffer cmd;
    private final MemorySegment cmdSeg;
    private final SegmentViews views = new SegmentViews();
    private final Endpoint endpoint;
    private final InFlight inFlight;

    /**
     * @param ch where commands go
     * @param bufferBytes size of the reused direct command buffer in bytes; bounds the longest key
     * @param endpoint the server, for messages
     * @param inFlight the operation in progress, for messages and the watchdog
     */
    public RespWriter(WritableByteChannel ch, int bufferBytes, Endpoint endpoint, InFlight inFlight) {
        this.ch = ch;
        this.cmd = ByteBuffer.allocateDirect(bufferBytes);
        this.cmdSeg = MemorySegment.ofBuffer(cmd);
        this.endpoint = endpoint;
        this.inFlight = inFlight;
    }

    /** The longest key, in UTF-8 bytes, that fits in one command next to its headers. */
    public int maxKeyBytes() {
        return cmd.capacity() / 2;
    }

    /** Binds a new channel (after a reconnect) and drops anything not yet flushed. */
    void bind(WritableByteChannel channel) {
        this.ch = channel;
        cmd.clear();
    }

    /** Starts a command of {@code args} arguments (the command name counts). */
    public RespWriter array(int args) {
        ensureSpace(BULK_HEADER_MAX);
        cmd.put((byte) '*');
        putDecimal(args);
        putCrlf();
        return this;
    }

    /** Appends a pre-encoded argument, such as {@link #token(String)} makes. */
    public RespWriter raw(byte[] encoded) {
        ensureSpace(encoded.length);
        cmd.put(encoded);
        return this;
    }

    /** Appends a string argument, UTF-8 encoded. */
    public RespWriter bulk(String s) {
        int len = utf8Length(s);
        ensureSpace(len + BULK_HEADER_MAX + 2);
        cmd.put((byte) '$');
        putDecimal(len);
        putCrlf();
        if (len == s.length()) {
            for (int i = 0; i < len; i++) {
                cmd.put((byte) s.charAt(i));
            }
        } else {
            cmd.put(s.getBytes(StandardCharsets.UTF_8));
        }
        putCrlf();
        return this;
    }

    /** Appends an integer argument as its decimal text. */
    public RespWriter bulk(long v) {
        ensureSpace(2 * BULK_HEADER_MAX);
        cmd.put((byte) '$');
        putDecimal(decimalLength(v));
        putCrlf();
        putDecimal(v);
        putCrlf();
        return this;
    }

    /** Appends a value argument: all of {@code value}'s bytes. Native values are written from their own memory. */
    public RespWriter bulk(MemorySegment value) {
        long len = value.byteSize();
        ensureSpace(BULK_HEADER_MAX + 2);
        cmd.put((byte) '$');
        putDecimal(len);
        putCrlf();
        if (len <= INLINE_VALUE_MAX_BYTES && len <= cmd.remaining() - 2) {
            MemorySegment.copy(value, 0, cmdSeg, cmd.position(), len);
            cmd.position(cmd.position() + (int) len);
        } else if (value.isNative()) {
            writeNative(value);
        } else {
            streamThroughBuffer(value);
        }
        ensureSpace(2);
        putCrlf();
        return this;
    }

    /** Writes every command appended since the last flush. */
    public void flush() {
        cmd.flip();
        try {
            writeFully(cmd);
        } finally {
            cmd.clear();
        }
    }

    /** The length in bytes of {@code s.getBytes(UTF_8)}, without allocating. */
    public static int utf8Length(String s) {
        int n = s.length();
        int len = n;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c >= 0x80) {
                if (c < 0x800) {
                    len += 1;
                } else if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                    len += 2;
                    i++;
                } else if (!Character.isSurrogate(c)) {
                    len += 2;
                }
                // A lone surrogate encodes as one replacement byte '?', as String.getBytes does.
            }
        }
        return len;
    }

    /** Pre-encodes a constant argument, such as a command name, as a RESP bulk string. */
    public static byte[] token(String ascii) {
        return ("$" + ascii.length() + "\r\n" + ascii + "\r\n").getBytes(StandardCharsets.US_ASCII);
    }

    /** Writes what is encoded so far, then the value from its own memory. */
    private void writeNative(MemorySegment value) {
        flush();
        long len = value.byteSize();
        if (len <= MAX_VIEW_BYTES) {
            writeFully(views.of(value));
        } else {
            for (long off = 0; off < len; off += MAX_VIEW_BYTES) {
                writeFully(value.asSlice(off, Math.min(MAX_VIEW_BYTES, len - off)).asByteBuffer());
            }
        }
    }

    /** A heap value too big to inline: flush what is pending, then send the value in buffer-sized chunks. */
    private void streamThroughBuffer(MemorySegment value) {
        long len = value.byteSize();
        long off = 0;
        while (off < len) {
            int n = (int) Math.min(cmd.remaining(), len - off);
            MemorySegment.copy(value, off, cmdSeg, cmd.position(), n);
            cmd.position(cmd.position() + n);
            off += n;
            if (!cmd.hasRemaining()) {
                flush();
            }
        }
    }

    private void ensureSpace(int n) {
        if (cmd.remaining() < n) {
            flush();
            if (cmd.remaining() < n) {
                throw new IllegalArgumentException("an argument of " + n + " bytes does not fit the "
                        + cmd.capacity() + "-byte command buffer");
            }
        }
    }

    /** Writes all of {@code b}: a blocking channel may still return after part of it. */
    private void writeFully(ByteBuffer b) {
        try {
            while (b.hasRemaining()) {
                if (ch.write(b) > 0) {
                    inFlight.progress();
                }
            }
        } catch (IOException e) {
            throw endpoint.ioFailure(inFlight, e);
        }
    }

    private void putCrlf() {
        cmd.put((byte) '\r').put((byte) '\n');
    }

    private void putDecimal(long v) {
        if (v < 0) {
            cmd.put((byte) '-');
            v = -v;
        }
        int digits = decimalLength(v);
        int end = cmd.position() + digits;
        for (int i = end - 1; i >= cmd.position(); i--) {
            cmdSeg.set(ValueLayout.JAVA_BYTE, i, (byte) ('0' + (v % 10)));
            v /= 10;
        }
        cmd.position(end);
    }

    private static int decimalLength(long v) {
        int n = v < 0 ? 2 : 1;
        long a = Math.abs(v);
        while (a >= 10) {
            a /= 10;
            n++;
        }
        return n;
    }
}
