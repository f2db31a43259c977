package dev.kvconnector.proxy;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.ConnectException;
import java.util.concurrent.TimeUnit;

/**
 * One request to an upstream instance, on the event loop of the client it serves; every method runs there.
 * Answers arrive as calls of its {@link Listener}; the body is read as the client takes it ({@link #pauseReading()}).
 *
 * <p>A deadline (first byte, whole answer) is a task on the event loop that fails the exchange; {@link #cancel()}
 * (client gone, request done elsewhere) and every failure close the connection, so the instance sees the request
 * abandoned. A reused keep-alive connection that closes before any byte of the answer (the instance dropped it
 * while idle: vLLM does after 5 s) is replaced by a new one and the request sent again, once; a new connection that
 * fails is not, since the instance may have processed the request.
 */
final class UpstreamExchange {
    private static final Logger LOG = LoggerFactory.getLogger(UpstreamExchange.class);

    /** What the exchange reports, on the event loop; after {@link #onEnd} or {@link #onFailure} nothing more. */
    interface Listener {
        void onHeaders(UpstreamExchange ex, int status);

        /** Body bytes; the listener owns {@code content} and must release it. */
        void onContent(UpstreamExchange ex, ByteBuf content);

        void onEnd(UpstreamExchange ex);

        void onFailure(UpstreamExchange ex, UpstreamFailure failure);

        /** A listener method threw: a bug. The exchange is cancelled. */
        void onBug(RuntimeException e);
    }

    final Instance instance;
    final long startNanos;
    private final UpstreamClient client;
    private final EventLoop loop;
    private final String path;
    private final String requestId;
    private final String authorization;
    private final byte[] body;
    private final Listener listener;
    private Channel channel;
    private boolean reused;
    private boolean retriedStale;
    private HttpResponse response;
    private boolean done;
    private ScheduledFuture<?> deadlineTask;
    private String waitingFor = "a connection";

    private UpstreamExchange(UpstreamClient client, EventLoop loop, Instance instance, String path, String requestId,
                             String authorization, byte[] body, Listener listener) {
        this.client = client;
        this.loop = loop;
        this.instance = instance;
        this.path = path;
        this.requestId = requestId;
        this.authorization = authorization;
        this.body = body;
        this.listener = listener;
        this.startNanos = System.nanoTime();
    }

    /**
     * Sends {@code body} as a JSON POST of {@code path}; the instance's outstanding count is held until the exchange
     * ends, fails or is cancelled. Call on {@code loop}; arm a deadline right after.
     */
    static UpstreamExchange send(UpstreamClient client, EventLoop loop, Instance instance, String path,
                                 String requestId, String authorization, byte[] body, Listener listener) {
        instance.outstanding.incrementAndGet();
        UpstreamExchange ex = new UpstreamExchange(client, loop, instance, path, requestId, authorization, body,
                listener);
        Channel idle = client.idle(loop, instance.address);
        if (idle != null) {
            ex.reused = true;
            ex.attach(idle);
        } else {
            ex.open();
        }
        return ex;
    }

    private void open() {
        reused = false;
        client.connect(loop, instance.address).addListener((ChannelFutureListener) f -> {
            if (done) {
                f.channel().close();
            } else if (f.isSuccess()) {
                attach(f.channel());
            } else {
                fail(connectFailure(f.cause()));
            }
        });
    }

    private void attach(Channel ch) {
        channel = ch;
        ch.pipeline().get(Handler.class).exchange = this;
        DefaultFullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, path,
                Unpooled.wrappedBuffer(body));
        req.headers().set(HttpHeaderNames.HOST, instance.name)
                .set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON)
                .setInt(HttpHeaderNames.CONTENT_LENGTH, body.length)
                .set("X-Request-Id", requestId);
        if (authorization != null) {
            req.headers().set(HttpHeaderNames.AUTHORIZATION, authorization);
        }
        ch.writeAndFlush(req).addListener((ChannelFutureListener) f -> {
            if (!f.isSuccess() && !done && channel == f.channel()) {
                connectionLost(f.cause());
            }
        });
    }

    /** The answer's status; valid from {@link Listener#onHeaders}. */
    int status() {
        return response.status().code();
    }

    String header(String name) {
        return response == null ? null : response.headers().get(name);
    }

    double elapsedSeconds() {
        return (System.nanoTime() - startNanos) / 1e9;
    }

    /** From now on, the exchange fails at {@code deadlineNanos} ({@link System#nanoTime()} based). */
    void arm(long deadlineNanos, String what) {
        if (done) {
            return;
        }
        waitingFor = what;
        if (deadlineTask != null) {
            deadlineTask.cancel(false);
        }
        long delay = deadlineNanos - System.nanoTime();
        deadlineTask = loop.schedule(() -> {
            if (!done) {
                fail(new UpstreamFailure(instance, "timed out waiting for " + waitingFor, true));
            }
        }, Math.max(delay, 0), TimeUnit.NANOSECONDS);
    }

    /** Stops reading the answer until {@link #resumeReading()}: the client is not taking it as fast. */
    void pauseReading() {
        if (channel != null) {
            channel.config().setAutoRead(false);
        }
    }

    void resumeReading() {
        if (channel != null && !done) {
            channel.config().setAutoRead(true);
        }
    }

    /** Abandons the exchange without a listener call: the connection closes, the instance sees the request go. */
    void cancel() {
        if (!done) {
            end(false);
        }
    }

    // ---- events from the connection --------------------------------------------------------------

    private void onObject(Object msg) {
        if (done) {
            ReferenceCountUtil.release(msg);
            return;
        }
        try {
            if (msg instanceof HttpResponse r) {
                if (r.decoderResult().isFailure()) {
                    fail(new UpstreamFailure(instance, "unreadable answer: " + r.decoderResult().cause(), false));
                    return;
                }
                response = r;
                listener.onHeaders(this, r.status().code());
            }
            if (msg instanceof HttpContent c) {
                boolean last = msg instanceof LastHttpContent;
                if (c.content().isReadable() && !done) {
                    listener.onContent(this, c.content().retain());
                }
                if (last && !done) {
                    boolean keep = HttpUtil.isKeepAlive(response);
                    end(keep);
                    listener.onEnd(this);
                }
            }
        } catch (RuntimeException e) {
            LOG.error("unexpected error handling the answer of {}", instance, e);
            cancel();
            listener.onBug(e);
        } finally {
            ReferenceCountUtil.release(msg);
        }
    }

    /** The connection closed or failed before the answer was complete. */
    private void connectionLost(Throwable cause) {
        if (done) {
            return;
        }
        if (response == null && reused && !retriedStale) {
            // The instance dropped the idle connection: it never saw the request, so send it again.
            retriedStale = true;
            client.staleRetries.increment();
            LOG.info("{}: kept-alive connection closed before an answer; sending the request again on a new one",
                    instance);
            Channel old = channel;
            channel = null;
            detach(old);
            old.close();
            open();
            return;
        }
        String what = cause == null ? "connection closed before the answer was complete"
                : "connection failed: " + describe(cause);
        fail(new UpstreamFailure(instance, what + (response == null ? " (no answer)" : ""), false));
    }

    private void fail(UpstreamFailure f) {
        end(false);
        listener.onFailure(this, f);
    }

    /** Gives back the instance's outstanding slot, and the connection: to the pool when kept alive, else closed. */
    private void end(boolean keepConnection) {
        done = true;
        instance.outstanding.decrementAndGet();
        if (deadlineTask != null) {
            deadlineTask.cancel(false);
        }
        Channel ch = channel;
        if (ch == null) {
            return;
        }
        detach(ch);
        if (keepConnection) {
            ch.config().setAutoRead(true);
            client.release(ch, instance.address);
        } else {
            ch.close();
        }
    }

    private static void detach(Channel ch) {
        Handler h = ch.pipeline().get(Handler.class);
        if (h != null) {
            h.exchange = null;
        }
    }

    private UpstreamFailure connectFailure(Throwable cause) {
        if (cause instanceof ConnectTimeoutException) {
            return new UpstreamFailure(instance, "connect timed out (host down or firewalled?)", false, true);
        }
        if (cause instanceof ConnectException) {
            return new UpstreamFailure(instance,
                    "connection refused or unreachable (is the instance up and the port right?)", false, true);
        }
        return new UpstreamFailure(instance, "cannot connect: " + describe(cause), false, true);
    }

    private static String describe(Throwable e) {
        return e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
    }

    /** The last handler of an upstream connection: passes what arrives to the exchange that owns the connection. */
    static final class Handler extends ChannelInboundHandlerAdapter {
        UpstreamExchange exchange;

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            UpstreamExchange ex = exchange;
            if (ex == null) {
                // An idle connection got bytes nobody asked for: it cannot be reused.
                ReferenceCountUtil.release(msg);
                ctx.close();
                return;
            }
            ex.onObject(msg);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            UpstreamExchange ex = exchange;
            if (ex != null) {
                ex.connectionLost(null);
            }
            ctx.fireChannelInactive();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            UpstreamExchange ex = exchange;
            if (ex != null) {
                ex.connectionLost(cause);
            }
            ctx.close();
        }
    }
}
