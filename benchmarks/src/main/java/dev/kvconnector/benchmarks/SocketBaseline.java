package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The network floor: one layer over one loopback TCP connection with a raw blocking {@code SocketChannel}, from and
 * into native segments, against an in-process {@link LoopbackPeer}. No protocol, no parsing: a network store can
 * approach these times but not beat them on this machine.
 *
 * <ul>
 *   <li>{@link #sendWithAck}: send the layer, wait for a 1-byte ack (the floor of a PUT);</li>
 *   <li>{@link #fetch}: send 1 byte, receive the layer (the floor of a GET);</li>
 *   <li>{@link #echo}: send the layer and receive it back (both directions, the worst case of a round trip).</li>
 * </ul>
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class SocketBaseline {

    /** One connection to a peer that replies in one way; the layer lives in a native segment. */
    @State(Scope.Thread)
    public abstract static class Connection {
        /** Model preset whose layer is sent. */
        @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
        public String model;
        /** Prompt tokens. */
        @Param({"256", "1024", "4096"})
        public int tokens;

        Arena arena;
        LoopbackPeer peer;
        SocketChannel channel;
        ByteBuffer layer;
        ByteBuffer one;
        long bytes;

        abstract LoopbackPeer.Reply reply();

        /** Starts the peer and fills the layer. */
        @Setup(Level.Trial)
        public void setUp() {
            bytes = LayerShape.layerBytes(model, tokens);
            arena = Arena.ofShared();
            MemorySegment seg = LayerShape.randomSegment(arena, bytes);
            layer = seg.asByteBuffer();
            one = arena.allocate(1).asByteBuffer();
            peer = new LoopbackPeer(reply(), bytes);
            channel = peer.client();
        }

        /** Stops the peer and frees the buffers. */
        @TearDown(Level.Trial)
        public void tearDown() {
            peer.close();
            arena.close();
        }
    }

    /** A peer that acks every layer with 1 byte. */
    @State(Scope.Thread)
    public static class AckConnection extends Connection {
        @Override
        LoopbackPeer.Reply reply() {
            return LoopbackPeer.Reply.ACK;
        }
    }

    /** A peer that sends a layer for every 1-byte request. */
    @State(Scope.Thread)
    public static class ServeConnection extends Connection {
        @Override
        LoopbackPeer.Reply reply() {
            return LoopbackPeer.Reply.SERVE;
        }
    }

    /** A peer that sends every layer back. */
    @State(Scope.Thread)
    public static class EchoConnection extends Connection {
        @Override
        LoopbackPeer.Reply reply() {
            return LoopbackPeer.Reply.ECHO;
        }
    }

    /** Sends one layer and waits for the 1-byte ack. */
    @Benchmark
    public int sendWithAck(AckConnection c) throws IOException {
        LoopbackPeer.writeFully(c.channel, c.layer.clear());
        LoopbackPeer.readFully(c.channel, c.one.clear(), 1);
        return c.one.get(0);
    }

    /** Sends a 1-byte request and receives one layer. */
    @Benchmark
    public int fetch(ServeConnection c) throws IOException {
        LoopbackPeer.writeFully(c.channel, c.one.clear());
        LoopbackPeer.readFully(c.channel, c.layer.clear(), c.bytes);
        return c.layer.get(0);
    }

    /** Sends one layer and receives it back. */
    @Benchmark
    public int echo(EchoConnection c) throws IOException {
        LoopbackPeer.writeFully(c.channel, c.layer.clear());
        LoopbackPeer.readFully(c.channel, c.layer.clear(), c.bytes);
        return c.layer.get(0);
    }
}
