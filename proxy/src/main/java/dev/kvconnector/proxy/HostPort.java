package dev.kvconnector.proxy;

import java.net.URI;

/** A parsed {@code host:port} of an upstream instance; IPv6 hosts are written {@code [::1]:8100}. */
record HostPort(String host, int port) {

    static HostPort parse(String text) {
        if (text == null || text.isBlank()) {
            throw new IllegalArgumentException("instance address is empty: expected host:port, e.g. 10.0.0.5:8100");
        }
        String t = text.strip();
        if (t.startsWith("http://")) {
            t = t.substring("http://".length());
        }
        if (t.endsWith("/")) {
            t = t.substring(0, t.length() - 1);
        }
        int colon = t.lastIndexOf(':');
        if (colon <= 0 || colon == t.length() - 1) {
            throw new IllegalArgumentException("instance address '" + text + "' is not host:port, e.g. 10.0.0.5:8100");
        }
        String host = t.substring(0, colon);
        if (host.indexOf(':') >= 0 && !(host.startsWith("[") && host.endsWith("]"))) {
            throw new IllegalArgumentException("instance address '" + text + "': write IPv6 hosts in brackets, [::1]:8100");
        }
        int port;
        try {
            port = Integer.parseInt(t.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("instance address '" + text + "' has a non-numeric port");
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("instance address '" + text + "' has port " + port + " outside 1..65535");
        }
        return new HostPort(host, port);
    }

    URI baseUri() {
        return URI.create("http://" + host + ":" + port);
    }

    @Override
    public String toString() {
        return host + ":" + port;
    }
}
