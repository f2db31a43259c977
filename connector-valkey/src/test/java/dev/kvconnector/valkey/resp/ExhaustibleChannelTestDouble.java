package dev.kvconnector.valkey.resp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;

/** A test double of a socket: wraps a finite byte source and remembers whether a reader hit its end. */
final class ExhaustibleChannelTestDouble implements ReadableByteChannel {
    private final ReadableByteChannel source;
    private boolean exhausted;

    ExhaustibleChannelTestDouble(ReadableByteChannel source) {
        this.source = source;
    }

    boolean exhausted() {
        return exhausted;
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        int n = source.read(dst);
        if (n < 0) {
            exhausted = true;
        }
        return n;
    }

    @Override
    public boolean isOpen() {
        return source.isOpen();
    }

    @Override
    public void close() throws IOException {
        source.close();
    }
}
