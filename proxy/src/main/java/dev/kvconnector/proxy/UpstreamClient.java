package dev.kvconnector.proxy;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.util.concurrent.FastThreadLocal;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

/**
 * The HTTP/1.1 client for completion requests to the instances, on the proxy's event loops: a request goes out on a
 * connection of the event loop that serves its client, so D's chunks are read and written to the client by one
 * thread, with no hand-off. Each event loop keeps its own idle keep-alive connections per instance (no lock, no
 * sharing); the number of connections follows the requests in flight.
 *
 * <p>History, by measurement. {@code java.net.http.HttpClient} moves every response through its selector thread and
 * executor to the caller, two thread hand-offs per chunk: 190-240 us of client CPU per streamed completion (50
 * virtual-thread callers, 8 SSE chunks each) against 82-106 us for Apache HttpClient 5 classic, which reads the
 * socket on the caller's own virtual thread; so the proxy used HttpClient 5 until both sides moved to the event
 * loops (the numbers are in {@link XpydProxy}). The JDK client still does the health probes and model checks: rare
 * GETs, which it retries on a stale connection by itself.
 *
 * <p>Deadlines are tasks on the event loop ({@link UpstreamExchange}): scheduling one there is a queue insert on the
 * thread that runs it, not a timer thread's wake-up (a timer per deadline on a {@code ScheduledThreadPoolExecutor}
 * once cost the blocking design about 10% of its CPU).
 */
final class UpstreamClient {
    /** How long an idle upstream connection is kept: under uvicorn's (vLLM's) 5 s keep-alive, so it is rarely stale. */
    static final long IDLE_KEEP_NANOS = TimeUnit.SECONDS.toNanos(4);

    final LongAdder staleRetries;
    private final Class<? extends Channel> channelType;
    private final int connectTimeoutMillis;
    private final FastThreadLocal<Pool> pools = new FastThreadLocal<>() {
        @Override
        protected Pool initialValue() {
            return new Pool();
        }
    };

    UpstreamClient(ProxyConfig config, Class<? extends Channel> channelType, LongAdder staleRetries) {
        this.channelType = channelType;
        this.connectTimeoutMillis = (int) Math.min(config.connectTimeout().toMillis(), Integer.MAX_VALUE);
        this.staleRetries = staleRetries;
    }

    /** An idle connection to {@code address} of this event loop, or null. Call on {@code loop}. */
    Channel idle(EventLoop loop, HostPort address) {
        return pools.get().take(loop, address);
    }

    /** Opens a connection to {@code address} on {@code loop}. */
    ChannelFuture connect(EventLoop loop, HostPort address) {
        return new Bootstrap().group(loop).channel(channelType)
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, connectTimeoutMillis)
                .handler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        // SSE passes through byte for byte: no Accept-Encoding is sent, nothing is decompressed.
                        ch.pipeline().addLast(new HttpClientCodec(), new UpstreamExchange.Handler());
                    }
                })
                .connect(host(address), address.port());
    }

    private static String host(HostPort address) {
        String h = address.host();
        return h.startsWith("[") && h.endsWith("]") ? h.substring(1, h.length() - 1) : h;
    }

    /** Keeps a connection whose answer was read to its end for the next request. Call on its event loop. */
    void release(Channel ch, HostPort address) {
        pools.get().put(ch, address);
    }

    /** One event loop's idle connections, newest first; a sweep each second closes those idle too long. */
    private static final class Pool {
        private final Map<HostPort, ArrayDeque<Idle>> idle = new HashMap<>();
        private boolean sweeping;

        private record Idle(Channel channel, long sinceNanos) {
        }

        Channel take(EventLoop loop, HostPort address) {
            ArrayDeque<Idle> q = idle.get(address);
            if (q == null) {
                return null;
            }
            long now = System.nanoTime();
            for (Idle i = q.pollFirst(); i != null; i = q.pollFirst()) {
                if (i.channel.isActive() && now - i.sinceNanos < IDLE_KEEP_NANOS) {
                    return i.channel;
                }
                i.channel.close();
            }
            return null;
        }

        void put(Channel ch, HostPort address) {
            if (!ch.isActive()) {
                return;
            }
            idle.computeIfAbsent(address, k -> new ArrayDeque<>()).addFirst(new Idle(ch, System.nanoTime()));
            if (!sweeping) {
                sweeping = true;
                ch.eventLoop().scheduleAtFixedRate(this::sweep, 1, 1, TimeUnit.SECONDS);
            }
        }

        private void sweep() {
            long now = System.nanoTime();
            for (Iterator<ArrayDeque<Idle>> it = idle.values().iterator(); it.hasNext(); ) {
                ArrayDeque<Idle> q = it.next();
                // Oldest at the end.
                for (Idle i = q.peekLast(); i != null && (!i.channel.isActive()
                        || now - i.sinceNanos >= IDLE_KEEP_NANOS); i = q.peekLast()) {
                    q.pollLast().channel.close();
                }
                if (q.isEmpty()) {
                    it.remove();
                }
            }
        }
    }
}
