package dev.kvconnector.benchmarks;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/**
 * An OpenAI-compatible instance for {@link ProxyLoadTest}, a test double of vLLM for load only: it answers a
 * non-streamed completion at once with one token, and streams {@code max_tokens} events (8 at most), one every
 * {@code tokenMillis} ms like a decode step, with {@code "paced_ns"} (the time its timers really took) in the last.
 * Like vLLM's server (uvicorn, one asyncio loop) it serves every connection on one event-loop thread.
 *
 * <p>It replaced a JDK {@code HttpServer} on virtual threads, which cost 1,000-1,500 us of CPU per request at 200
 * paced clients (more than the proxy under test) and took 5-45 ms young pauses on G1: load on the two shared cores
 * that lengthened the tails of both sides of the comparison.
 */
final class LoadInstance implements AutoCloseable {
    static final String MODEL = "load-test-model";
    static final int TOKENS = 8;
    private static final ByteBuf MODELS = constant("{\"object\":\"list\",\"data\":[{\"id\":\"" + MODEL
            + "\",\"object\":\"model\"}]}");
    private static final ByteBuf ONE_TOKEN = constant("{\"id\":\"p\",\"object\":\"text_completion\",\"choices\":"
            + "[{\"index\":0,\"text\":\"x\",\"finish_reason\":\"length\"}]}");
    private static final ByteBuf[] EVENTS = new ByteBuf[TOKENS - 1];
    private static final ByteBuf DONE = constant("data: [DONE]\n\n");
    private static final byte[] STREAM = "\"stream\":true".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] MAX_TOKENS = "\"max_tokens\":".getBytes(StandardCharsets.US_ASCII);

    static {
        for (int i = 0; i < EVENTS.length; i++) {
            EVENTS[i] = constant("data: {\"choices\":[{\"index\":0,\"text\":\"t" + i + "\"}]}\n\n");
        }
    }

    private final long tokenNanos;
    private final LoopbackHttpServer server;

    LoadInstance(long tokenMillis) throws InterruptedException {
        this.tokenNanos = TimeUnit.MILLISECONDS.toNanos(tokenMillis);
        this.server = new LoopbackHttpServer(1, Handler::new);
    }

    int port() {
        return server.port();
    }

    @Override
    public void close() {
        server.close();
    }

    private static ByteBuf constant(String s) {
        return Unpooled.unreleasableBuffer(Unpooled.directBuffer().writeBytes(s.getBytes(StandardCharsets.UTF_8)))
                .asReadOnly();
    }

    private final class Handler extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            boolean keepAlive = HttpUtil.isKeepAlive(req);
            switch (req.uri()) {
                case "/v1/models" -> full(ctx, MODELS, keepAlive);
                case "/health" -> full(ctx, Unpooled.EMPTY_BUFFER, keepAlive);
                case "/v1/completions" -> {
                    if (indexOf(req.content(), STREAM) >= 0) {
                        stream(ctx.channel(), keepAlive, maxTokens(req.content()));
                    } else {
                        full(ctx, ONE_TOKEN, keepAlive);
                    }
                }
                default -> {
                    DefaultFullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1,
                            HttpResponseStatus.NOT_FOUND, Unpooled.EMPTY_BUFFER);
                    r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 0);
                    ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
                }
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    private static void full(ChannelHandlerContext ctx, ByteBuf body, boolean keepAlive) {
        DefaultFullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
                body.duplicate());
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON)
                .setInt(HttpHeaderNames.CONTENT_LENGTH, body.readableBytes());
        HttpUtil.setKeepAlive(r, keepAlive);
        var f = ctx.writeAndFlush(r);
        if (!keepAlive) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
    }

    private void stream(Channel ch, boolean keepAlive, int tokens) {
        DefaultHttpResponse r = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/event-stream");
        HttpUtil.setTransferEncodingChunked(r, true);
        HttpUtil.setKeepAlive(r, keepAlive);
        ch.writeAndFlush(r);
        next(ch, keepAlive, tokens, 0, 0);
    }

    /**
     * Writes event {@code i} of {@code tokens} after one token interval, timed; {@code paced} is what the earlier
     * intervals took.
     */
    private void next(Channel ch, boolean keepAlive, int tokens, int i, long paced) {
        if (!ch.isActive()) {
            return;
        }
        if (tokenNanos == 0) {
            emit(ch, keepAlive, tokens, i, 0);
            return;
        }
        long t0 = System.nanoTime();
        ch.eventLoop().schedule(() -> emit(ch, keepAlive, tokens, i, paced + System.nanoTime() - t0), tokenNanos,
                TimeUnit.NANOSECONDS);
    }

    private void emit(Channel ch, boolean keepAlive, int tokens, int i, long paced) {
        if (i < tokens - 1) {
            ch.writeAndFlush(new DefaultHttpContent(EVENTS[i].duplicate()));
            next(ch, keepAlive, tokens, i + 1, paced);
            return;
        }
        // The last token carries the time this stream spent pacing, and [DONE] follows at once.
        ByteBuf last = ch.alloc().buffer(128);
        last.writeCharSequence("data: {\"choices\":[{\"index\":0,\"text\":\"t" + i + "\"}],\"paced_ns\":" + paced
                + "}\n\n", StandardCharsets.US_ASCII);
        last.writeBytes(DONE.duplicate());
        var f = ch.writeAndFlush(new DefaultLastHttpContent(last));
        if (!keepAlive) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
    }

    /** The request's {@code max_tokens}, at most {@link #TOKENS}; {@link #TOKENS} when it has none. */
    private static int maxTokens(ByteBuf body) {
        int at = indexOf(body, MAX_TOKENS);
        if (at < 0) {
            return TOKENS;
        }
        int n = 0;
        for (int i = at + MAX_TOKENS.length; i < body.writerIndex() && Character.isDigit(body.getByte(i)); i++) {
            n = n * 10 + body.getByte(i) - '0';
        }
        return Math.clamp(n, 1, TOKENS);
    }

    private static int indexOf(ByteBuf hay, byte[] needle) {
        int end = hay.writerIndex() - needle.length;
        outer:
        for (int i = hay.readerIndex(); i <= end; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (hay.getByte(i + j) != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }
}
