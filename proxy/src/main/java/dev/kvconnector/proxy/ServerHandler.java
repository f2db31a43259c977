package dev.kvconnector.proxy;

import io.netty.buffer.ByteBufUtil;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.DuplexChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.buffer.Unpooled;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The last handler of a client connection: turns each whole request into a {@link ClientRequest} and hands it to
 * the proxy, one at a time (a pipelined request waits until the answer before it is complete), and tells the
 * request's inference call when the client leaves or can take more bytes. Runs on the connection's event loop.
 */
final class ServerHandler extends ChannelInboundHandlerAdapter {
    private static final Logger LOG = LoggerFactory.getLogger(ServerHandler.class);
    /** How long a rejected connection keeps draining the client's unread body before it closes. */
    static final long LINGER_MILLIS = 2_000;

    private final Consumer<ClientRequest> dispatch;
    private final ArrayDeque<ClientRequest> waiting = new ArrayDeque<>(2);
    private ClientRequest current;

    ServerHandler(Consumer<ClientRequest> dispatch) {
        this.dispatch = dispatch;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof FullHttpRequest req)) {
            io.netty.util.ReferenceCountUtil.release(msg);
            return;
        }
        ClientRequest r;
        try {
            if (req.decoderResult().isFailure()) {
                LOG.debug("unreadable request from {}: {}", ctx.channel().remoteAddress(), req.decoderResult().cause());
                reject(ctx, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                        "malformed HTTP request: " + req.decoderResult().cause().getMessage());
                return;
            }
            r = new ClientRequest(ctx.channel(), req.method().name(), new QueryStringDecoder(req.uri()).path(),
                    req.headers(), ByteBufUtil.getBytes(req.content()), HttpUtil.isKeepAlive(req),
                    () -> answered(ctx));
        } finally {
            req.release();
        }
        if (current == null) {
            start(r);
        } else {
            waiting.add(r);
        }
    }

    private void start(ClientRequest r) {
        current = r;
        dispatch.accept(r);
    }

    /** The current request's answer is written; the next waiting one starts. Any thread. */
    private void answered(ChannelHandlerContext ctx) {
        if (!ctx.executor().inEventLoop()) {
            ctx.executor().execute(() -> answered(ctx));
            return;
        }
        current = null;
        ClientRequest next = waiting.poll();
        if (next != null) {
            start(next);
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        ClientRequest r = current;
        InferenceCall call = r == null ? null : r.call;
        if (call != null) {
            call.clientGone();
        }
        waiting.clear();
        ctx.fireChannelInactive();
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        ClientRequest r = current;
        InferenceCall call = r == null ? null : r.call;
        if (call != null && ctx.channel().isWritable()) {
            call.clientWritable();
        }
        ctx.fireChannelWritabilityChanged();
    }

    /**
     * A connection idle for {@link ProxyConfig#clientIdleTimeout()} with no request in flight is closed (see the
     * pipeline).
     */
    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt instanceof IdleStateEvent && current == null) {
            ctx.close();
        } else {
            ctx.fireUserEventTriggered(evt);
        }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        LOG.debug("client connection {} failed: {}", ctx.channel().remoteAddress(), cause.toString());
        ctx.close();
    }

    /**
     * Answers a request that cannot be read and ends the connection. The close lingers: the proxy sends its answer
     * and a FIN, then keeps reading (and discarding) until the client closes or {@link #LINGER_MILLIS} pass. Closing
     * at once, while the client is still sending the body, would leave unread bytes in the socket, and the kernel
     * would answer them with a reset that can destroy the answer before the client reads it.
     */
    static void reject(ChannelHandlerContext ctx, HttpResponseStatus status, String type, String message) {
        byte[] body = HttpIo.errorBody(message, type, status.code());
        DefaultFullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status,
                Unpooled.wrappedBuffer(body));
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON)
                .setInt(HttpHeaderNames.CONTENT_LENGTH, body.length)
                .set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        ctx.writeAndFlush(r).addListener((ChannelFutureListener) written -> {
            if (!written.isSuccess() || !(written.channel() instanceof DuplexChannel duplex)) {
                written.channel().close();
                return;
            }
            duplex.shutdownOutput();
            duplex.eventLoop().schedule(() -> duplex.close(), LINGER_MILLIS, TimeUnit.MILLISECONDS);
        });
    }

    /**
     * Reads a request whole, up to the proxy's request-size limit; beyond it (declared or while reading) the client
     * gets a 413 and the connection closes, since the unread rest would desynchronise it.
     */
    static final class LimitedAggregator extends HttpObjectAggregator {
        private final long limit;
        private final ProxyMetrics metrics;

        LimitedAggregator(long limit, ProxyMetrics metrics) {
            super((int) Math.min(limit, Integer.MAX_VALUE - 1));
            this.limit = limit;
            this.metrics = metrics;
        }

        @Override
        protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
            metrics.response(413);
            reject(ctx, HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "invalid_request_error",
                    "request body exceeds the limit of " + limit + " bytes (--max-request-bytes)");
        }
    }
}
