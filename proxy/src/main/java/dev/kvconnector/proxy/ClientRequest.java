package dev.kvconnector.proxy;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;

/**
 * One client request on the proxy's server, read in full, and the one answer it gets: a whole response, or a
 * stream of chunks. Answering methods may be called from any thread (Netty queues writes to the connection's event
 * loop); {@link ServerHandler} starts the connection's next request once the answer is complete.
 */
final class ClientRequest {
    final Channel channel;
    final String method;
    final String path;
    final HttpHeaders headers;
    final byte[] body;
    /** Headers added to the answer (Allow, X-Request-Id, Connection). */
    final HttpHeaders responseHeaders = new DefaultHttpHeaders();
    private final boolean keepAlive;
    private final Runnable onAnswered;
    /** The status sent, 0 before the answer starts. */
    private volatile int status;
    /** The inference call this request drives, told when the client leaves or can take more bytes. */
    volatile InferenceCall call;

    ClientRequest(Channel channel, String method, String path, HttpHeaders headers, byte[] body, boolean keepAlive,
                  Runnable onAnswered) {
        this.channel = channel;
        this.method = method;
        this.path = path;
        this.headers = headers;
        this.body = body;
        this.keepAlive = keepAlive;
        this.onAnswered = onAnswered;
    }

    int status() {
        return status;
    }

    /** Sends a whole answer, with Content-Length. */
    void send(int code, String contentType, byte[] bytes) {
        status = code;
        DefaultFullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(code),
                Unpooled.wrappedBuffer(bytes));
        r.headers().add(responseHeaders);
        if (contentType != null) {
            r.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
        }
        r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, bytes.length);
        finish(channel.writeAndFlush(prepare(r)));
    }

    /** Starts a streamed answer (chunked); follow with {@link #chunk} and {@link #endStream()}. */
    void startStream(int code, String contentType) {
        status = code;
        DefaultHttpResponse r = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(code));
        r.headers().add(responseHeaders);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
        r.headers().set(HttpHeaderNames.CACHE_CONTROL, HttpHeaderValues.NO_CACHE);
        HttpUtil.setTransferEncodingChunked(r, true);
        channel.write(prepare(r));
    }

    /** Writes and flushes bytes of a streamed answer; takes ownership of {@code bytes}. */
    void chunk(ByteBuf bytes) {
        channel.writeAndFlush(new DefaultHttpContent(bytes));
    }

    void endStream() {
        finish(channel.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT));
    }

    private DefaultHttpResponse prepare(DefaultHttpResponse r) {
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        return r;
    }

    private boolean closesAfter() {
        return !keepAlive || HttpHeaderValues.CLOSE.contentEqualsIgnoreCase(responseHeaders.get(HttpHeaderNames.CONNECTION));
    }

    private void finish(ChannelFuture written) {
        if (closesAfter()) {
            written.addListener(ChannelFutureListener.CLOSE);
        } else {
            onAnswered.run();
        }
    }
}
