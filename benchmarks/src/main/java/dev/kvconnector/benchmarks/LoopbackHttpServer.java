package dev.kvconnector.benchmarks;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpServerCodec;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * An HTTP/1.1 server of {@link ProxyLoadTest} on a free 127.0.0.1 port: Netty's native epoll transport,
 * {@code threads} event loops, whole requests (up to 1 MiB) handed to a new {@code handler} per connection.
 */
final class LoopbackHttpServer implements AutoCloseable {
    private final EventLoopGroup group;
    private final Channel server;

    LoopbackHttpServer(int threads, Supplier<ChannelHandler> handler) throws InterruptedException {
        if (!Epoll.isAvailable()) {
            throw new IllegalStateException("Netty's native epoll transport does not load here",
                    Epoll.unavailabilityCause());
        }
        this.group = new MultiThreadIoEventLoopGroup(threads, EpollIoHandler.newFactory());
        this.server = new ServerBootstrap().group(group).channel(EpollServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new HttpServerCodec(), new HttpObjectAggregator(1 << 20), handler.get());
                    }
                })
                .bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    @Override
    public void close() {
        server.close().syncUninterruptibly();
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }
}
