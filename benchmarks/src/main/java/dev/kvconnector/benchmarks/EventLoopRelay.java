package dev.kvconnector.benchmarks;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.concurrent.FastThreadLocal;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;

/**
 * The event-loop floor of {@link ProxyLoadTest}: the proxy's V0 hot path alone (read the client's JSON, send P a
 * one-token copy and discard its answer, send D the request and pass its stream through) on Netty, with the
 * client's connection and both upstream connections served by one event-loop thread, so a chunk goes from D's
 * socket to the client's with no thread hand-off. It has none of the proxy's policies, retries, timeouts or
 * metrics: what it costs is the least the proxy's event-loop design could cost. Measured beside the JDK-server proxy
 * it decided the proxy's move to Netty; measured beside the Netty proxy ({@code ProxyLoadTest --relay}) it shows
 * what the proxy's own logic adds.
 */
final class EventLoopRelay implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final LoopbackHttpServer server;
    private final InetSocketAddress prefill;
    private final InetSocketAddress decode;
    /** Idle keep-alive upstream connections per address, one set per event loop: never shared across threads. */
    private final FastThreadLocal<Map<InetSocketAddress, ArrayDeque<Channel>>> idle = new FastThreadLocal<>() {
        @Override
        protected Map<InetSocketAddress, ArrayDeque<Channel>> initialValue() {
            return new HashMap<>();
        }
    };

    EventLoopRelay(InetSocketAddress prefill, InetSocketAddress decode, int threads) throws InterruptedException {
        this.prefill = prefill;
        this.decode = decode;
        this.server = new LoopbackHttpServer(threads, ClientHandler::new);
    }

    int port() {
        return server.port();
    }

    @Override
    public void close() {
        server.close();
    }

    /** What an upstream connection's answer goes to; set while a request is out on it. */
    private interface Sink {
        void onObject(Channel upstream, HttpObject msg);

        void onClosed(Channel upstream);
    }

    private final class ClientHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) throws IOException {
            Channel client = ctx.channel();
            boolean keepAlive = HttpUtil.isKeepAlive(req);
            if (req.method() != HttpMethod.POST || !req.uri().equals("/v1/completions")) {
                fail(client, HttpResponseStatus.NOT_FOUND, "no endpoint " + req.uri());
                return;
            }
            ObjectNode body = (ObjectNode) JSON.readTree(new io.netty.buffer.ByteBufInputStream(req.content()));
            ObjectNode p = body.deepCopy();
            p.put("max_tokens", 1);
            p.put("request_id", "relay");
            byte[] pBytes = JSON.writeValueAsBytes(p);
            body.put("request_id", "relay");
            byte[] dBytes = JSON.writeValueAsBytes(body);
            send(client.eventLoop(), prefill, pBytes, new Sink() {
                @Override
                public void onObject(Channel upstream, HttpObject msg) {
                    if (msg instanceof LastHttpContent) {
                        release(upstream, prefill);
                        send(client.eventLoop(), decode, dBytes, new Relay(client, keepAlive));
                    }
                }

                @Override
                public void onClosed(Channel upstream) {
                    fail(client, HttpResponseStatus.BAD_GATEWAY, "prefill connection closed");
                }
            });
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    /** Passes D's answer to the client as it arrives, on the event loop both connections share. */
    private final class Relay implements Sink {
        private final Channel client;
        private final boolean keepAlive;

        Relay(Channel client, boolean keepAlive) {
            this.client = client;
            this.keepAlive = keepAlive;
        }

        @Override
        public void onObject(Channel upstream, HttpObject msg) {
            if (msg instanceof HttpResponse r) {
                DefaultHttpResponse out = new DefaultHttpResponse(HttpVersion.HTTP_1_1, r.status());
                String type = r.headers().get(HttpHeaderNames.CONTENT_TYPE);
                out.headers().set(HttpHeaderNames.CONTENT_TYPE, type == null ? "text/event-stream" : type);
                HttpUtil.setTransferEncodingChunked(out, true);
                HttpUtil.setKeepAlive(out, keepAlive);
                client.write(out);
            }
            if (msg instanceof LastHttpContent last) {
                if (last.content().isReadable()) {
                    client.write(new DefaultHttpContent(last.content().retain()));
                }
                var f = client.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
                if (!keepAlive) {
                    f.addListener(ChannelFutureListener.CLOSE);
                }
                release(upstream, decode);
            } else if (msg instanceof HttpContent c) {
                client.writeAndFlush(new DefaultHttpContent(c.content().retain()));
            }
        }

        @Override
        public void onClosed(Channel upstream) {
            client.close();
        }
    }

    private void send(EventLoop loop, InetSocketAddress to, byte[] json, Sink sink) {
        ArrayDeque<Channel> pool = idle.get().computeIfAbsent(to, k -> new ArrayDeque<>());
        Channel ch = pool.pollFirst();
        while (ch != null && !ch.isActive()) {
            ch = pool.pollFirst();
        }
        if (ch != null) {
            write(ch, to, json, sink);
            return;
        }
        new Bootstrap().group(loop).channel(EpollSocketChannel.class).option(ChannelOption.TCP_NODELAY, true)
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel c) {
                        c.pipeline().addLast(new HttpClientCodec(), new UpstreamHandler());
                    }
                })
                .connect(to).addListener((ChannelFutureListener) f -> {
                    if (f.isSuccess()) {
                        write(f.channel(), to, json, sink);
                    } else {
                        sink.onClosed(f.channel());
                    }
                });
    }

    private static void write(Channel ch, InetSocketAddress to, byte[] json, Sink sink) {
        ch.pipeline().get(UpstreamHandler.class).sink = sink;
        ByteBuf content = Unpooled.wrappedBuffer(json);
        DefaultFullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST,
                "/v1/completions", content);
        req.headers().set(HttpHeaderNames.HOST, to.getHostString() + ":" + to.getPort())
                .set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON)
                .setInt(HttpHeaderNames.CONTENT_LENGTH, json.length);
        ch.writeAndFlush(req);
    }

    private void release(Channel upstream, InetSocketAddress to) {
        upstream.pipeline().get(UpstreamHandler.class).sink = null;
        if (upstream.isActive()) {
            idle.get().computeIfAbsent(to, k -> new ArrayDeque<>()).addFirst(upstream);
        }
    }

    private static final class UpstreamHandler extends SimpleChannelInboundHandler<HttpObject> {
        Sink sink;

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, HttpObject msg) {
            Sink s = sink;
            if (s != null) {
                s.onObject(ctx.channel(), msg);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            Sink s = sink;
            sink = null;
            if (s != null) {
                s.onClosed(ctx.channel());
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    private static void fail(Channel client, HttpResponseStatus status, String message) {
        byte[] b = ("{\"error\":{\"message\":\"" + message + "\"}}").getBytes(StandardCharsets.UTF_8);
        DefaultFullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status,
                Unpooled.wrappedBuffer(b));
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON)
                .setInt(HttpHeaderNames.CONTENT_LENGTH, b.length);
        client.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
    }
}
