package dev.kvconnector.store;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A parsed store URI: {@code scheme:[//[user[:password]@]host[:port][,host[:port]...]][/path][?k=v&...]}, or a
 * store over other stores, {@code scheme:[uri][uri]...[?k=v&...]}, each inner URI whole inside balanced square
 * brackets (so an inner {@code [::1]} host or an inner bracketed list stays inside its own). Examples:
 * {@code memory:?capacity=2GiB}, {@code shm:/kv?capacity=4GiB}, {@code valkey://u:p@h:6379/0?ttl=60s},
 * {@code valkey+cluster://h1:7000,h2:7001}, {@code tiered:[shm:/kv][valkey://h:6379]?write=back}.
 *
 * <p>{@link #toString()} and {@link #masked()} never show the password, a user info without {@code :} (it may be a
 * token), or the value of an option whose name holds {@code pass}, {@code secret} or {@code token}.
 *
 * <p>Over 400 lines because the grammar above (host lists, bracketed IPv6 hosts, nested inner URIs, options) is
 * parsed in one pass, and the masking of secrets must see that same parse.
 */
public final class StoreUri {
    private static final Pattern SCHEME = Pattern.compile("[a-zA-Z][a-zA-Z0-9+.-]*");
    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([KMGT]i?B|[KMGT]|B)?", Pattern.CASE_INSENSITIVE);
    private static final Pattern DURATION = Pattern.compile("(\\d+)\\s*(ms|s|m|h|d)?", Pattern.CASE_INSENSITIVE);

    /** A host and port from the authority; port is -1 when absent. */
    public record HostPort(String host, int port) {
        @Override
        public String toString() {
            return port < 0 ? host : host + ":" + port;
        }
    }

    private final String scheme;
    private final String user;
    private final String password;
    private final List<HostPort> hosts;
    private final String path;
    private final List<String> nested;
    private final Map<String, String> params;
    private final String masked;

    private StoreUri(String scheme, String user, String password, List<HostPort> hosts, String path,
                     List<String> nested, Map<String, String> params) {
        this.scheme = scheme;
        this.user = user;
        this.password = password;
        this.hosts = List.copyOf(hosts);
        this.path = path;
        this.nested = List.copyOf(nested);
        this.params = Collections.unmodifiableMap(params);
        this.masked = buildMasked();
    }

    /**
     * Parses a URI; malformed input is an {@link ErrorCode#INVALID_URI} error whose message never holds the
     * password. As RFC 3986 says, the authority ends at the first {@code /}, {@code ?} or {@code #} after
     * {@code //}, and the user info is everything before its last {@code @}, split at its first {@code :}. Every
     * component is percent-decoded as UTF-8 and nothing else: a {@code +} stays a {@code +}. A password that
     * holds {@code /}, {@code ?}, {@code #} or {@code %} must write them {@code %2F}, {@code %3F}, {@code %23} and
     * {@code %25}; {@code @} and {@code :} may stay raw.
     */
    public static StoreUri parse(String text) {
        if (text == null || text.isBlank()) {
            throw invalidUri(String.valueOf(text), "the store URI is empty");
        }
        String s = text.trim();
        int colon = s.indexOf(':');
        if (colon <= 0 || !SCHEME.matcher(s.substring(0, colon)).matches()) {
            throw invalidUri(maskRaw(s), "no scheme: a store URI starts with a scheme such as memory:, shm:, "
                    + "valkey:// or mooncake://");
        }
        String scheme = s.substring(0, colon).toLowerCase(Locale.ROOT);
        String rest = s.substring(colon + 1);
        String user = null;
        String password = null;
        List<HostPort> hosts = new ArrayList<>();
        List<String> nested = new ArrayList<>();
        if (rest.startsWith("[")) {
            rest = splitNested(rest, nested, s);
        } else if (rest.startsWith("//")) {
            String after = rest.substring(2);
            int end = indexOfAny(after, "/?#", 0);
            int strayAt = end < 0 ? -1 : after.indexOf('@', end);
            int eq = end < 0 ? -1 : after.indexOf('=', end);
            if (strayAt >= 0 && (eq < 0 || strayAt < eq)) {
                throw strayAt(s);
            }
            String auth = end < 0 ? after : after.substring(0, end);
            rest = end < 0 ? "" : after.substring(end);
            int at = auth.lastIndexOf('@');
            if (at >= 0) {
                String ui = auth.substring(0, at);
                auth = auth.substring(at + 1);
                int c = ui.indexOf(':');
                user = decode(c >= 0 ? ui.substring(0, c) : ui, "the user name", c < 0, s);
                password = c >= 0 ? decode(ui.substring(c + 1), "the password", true, s) : null;
                if (user.isEmpty()) {
                    user = null;
                }
            }
            if (!auth.isEmpty()) {
                try {
                    for (String hp : auth.split(",", -1)) {
                        hosts.add(parseHostPort(hp, s));
                    }
                } catch (KVException e) {
                    // With an '@' further on, the "host" may be the front of a password cut short by a raw '?'.
                    throw strayAt >= 0 ? strayAt(s) : e;
                }
            }
        }
        if (rest.indexOf('#') >= 0) {
            throw invalidUri(maskRaw(s), "a raw '#' (a store URI has no fragment)",
                    "percent-encode a '#' in an option value as %23");
        }
        String query = "";
        int q = rest.indexOf('?');
        if (q >= 0) {
            query = rest.substring(q + 1);
            rest = rest.substring(0, q);
        }
        String path = rest;
        Map<String, String> params = new LinkedHashMap<>();
        if (!query.isEmpty()) {
            for (String pair : query.split("&")) {
                if (pair.isEmpty()) {
                    continue;
                }
                int e = pair.indexOf('=');
                String k = decode(e >= 0 ? pair.substring(0, e) : pair, "an option name", false, s);
                String v = e >= 0 ? decode(pair.substring(e + 1), "option " + k, UriMasking.isSecretParam(k), s) : "";
                if (params.put(k, v) != null) {
                    throw invalidUri(maskRaw(s), "option '" + k + "' is given twice");
                }
            }
        }
        return new StoreUri(scheme, user, password, hosts, path, nested, params);
    }

    /**
     * Moves each {@code [uri]} group at the front of {@code rest} into {@code nested} and returns what follows the
     * last group, which may only be a query.
     */
    private static String splitNested(String rest, List<String> nested, String whole) {
        int i = 0;
        while (i < rest.length() && rest.charAt(i) == '[') {
            int depth = 0;
            int end = -1;
            for (int j = i; j < rest.length() && end < 0; j++) {
                char c = rest.charAt(j);
                depth += c == '[' ? 1 : c == ']' ? -1 : 0;
                end = depth == 0 ? j : -1;
            }
            if (end < 0) {
                throw invalidUri(maskRaw(whole), "the '[' at character " + (whole.length() - rest.length() + i)
                        + " has no matching ']'", "write each inner store URI whole inside its own [ ]");
            }
            String inner = rest.substring(i + 1, end).trim();
            if (inner.isEmpty()) {
                throw invalidUri(maskRaw(whole), "inner store URI " + (nested.size() + 1) + " is empty ('[]')");
            }
            nested.add(inner);
            i = end + 1;
        }
        String after = rest.substring(i);
        if (!after.isEmpty() && after.charAt(0) != '?') {
            throw invalidUri(maskRaw(whole), "unexpected '" + maskRaw(after) + "' after the inner store URIs",
                    "only options (?k=v&...) may follow the last ]");
        }
        return after;
    }

    private static KVException strayAt(String s) {
        return invalidUri(maskRaw(s), "an '@' comes after the end of the host part: a raw '/', '?' or '#' in the "
                + "user name or password ends the host part early", "percent-encode them in the user info: '/' as "
                + "%2F, '?' as %3F, '#' as %23 (and '%' as %25)");
    }

    static int indexOfAny(String s, String chars, int from) {
        for (int i = from; i < s.length(); i++) {
            if (chars.indexOf(s.charAt(i)) >= 0) {
                return i;
            }
        }
        return -1;
    }

    private static HostPort parseHostPort(String hp, String whole) {
        String h = hp;
        int port = -1;
        int c = hp.lastIndexOf(':');
        boolean ipv6 = hp.startsWith("[");
        if (c >= 0 && (!ipv6 || c > hp.indexOf(']'))) {
            h = hp.substring(0, c);
            String p = hp.substring(c + 1);
            try {
                port = Integer.parseInt(p);
            } catch (NumberFormatException e) {
                throw invalidUri(maskRaw(whole), "port '" + p + "' of host '" + h + "' is not a number");
            }
            if (port <= 0 || port > 65535) {
                throw invalidUri(maskRaw(whole), "port " + port + " of host '" + h + "' is out of range 1-65535");
            }
        }
        if (ipv6) {
            h = h.substring(1, h.length() - 1);
        }
        if (h.isEmpty()) {
            throw invalidUri(maskRaw(whole), "an empty host name in '" + hp + "'");
        }
        return new HostPort(h, port);
    }

    /** Percent-decodes one component; {@code what} names it in errors, and a {@code secret} one is never quoted. */
    private static String decode(String s, String what, boolean secret, String whole) {
        try {
            return PercentCoding.decode(s);
        } catch (PercentCoding.BadEncodingException e) {
            throw invalidUri(maskRaw(whole), what + " " + e.problem() + (secret ? "" : " in '" + s + "'"),
                    e.remedy());
        }
    }

    /**
     * Percent-encodes one component (a user name, password, option name or value) so that {@link #parse} reads it
     * back unchanged: every byte of its UTF-8 form outside {@code A-Z a-z 0-9 - . _ ~} becomes {@code %XX}.
     */
    public static String encode(String s) {
        return PercentCoding.encode(s);
    }

    private static KVException invalidUri(String uri, String detail) {
        return KVException.of(ErrorCode.INVALID_URI, detail).store(uri).build();
    }

    private static KVException invalidUri(String uri, String detail, String hint) {
        return KVException.of(ErrorCode.INVALID_URI, detail).store(uri).hint(hint).build();
    }

    /**
     * Masks the secrets in text that may not parse (malformed URIs, URIs nested in option values): see
     * {@link UriMasking#maskRaw}.
     */
    public static String maskRaw(String s) {
        return UriMasking.maskRaw(s);
    }

    /** The lower-case scheme, such as {@code valkey}. */
    public String scheme() {
        return scheme;
    }

    /** The user name, or null. */
    public String user() {
        return user;
    }

    /** The password, or null. Never log it. */
    public String password() {
        return password;
    }

    /** The hosts of the authority, in order; empty for {@code memory:} and {@code shm:}. */
    public List<HostPort> hosts() {
        return hosts;
    }

    /** The single host, with {@code defaultPort} when none is given; an error when there is not exactly one. */
    public HostPort singleHost(int defaultPort) {
        if (hosts.size() != 1) {
            throw invalidUri(masked, "expected exactly one host:port, found " + hosts.size());
        }
        HostPort h = hosts.getFirst();
        return h.port() < 0 ? new HostPort(h.host(), defaultPort) : h;
    }

    /** The path, such as {@code /kv} or {@code /0}; empty when absent. */
    public String path() {
        return path;
    }

    /**
     * The inner store URIs of a store over other stores ({@code tiered:[a][b]}), in order, each exactly as written
     * between its brackets (secrets included: mask them with {@link #maskRaw} before showing them); empty for every
     * other URI.
     */
    public List<String> nested() {
        return nested;
    }

    /** All query options, in order. */
    public Map<String, String> params() {
        return params;
    }

    /** One option's value, or null. */
    public String param(String name) {
        return params.get(name);
    }

    /**
     * Fails with {@link ErrorCode#INVALID_URI} if the URI holds a user name or password, for stores that take none:
     * a credential that would be ignored must not look as if it were used.
     */
    public StoreUri requireNoUserInfo() {
        if (user != null || password != null) {
            throw invalidUri(masked, scheme + ": stores take no user name or password",
                    "remove the part before '@' from the URI");
        }
        return this;
    }

    /** Fails with {@link ErrorCode#INVALID_URI} if any option is not in {@code known}: no typo goes unnoticed. */
    public StoreUri requireKnownParams(Set<String> known) {
        for (String k : params.keySet()) {
            if (!known.contains(k)) {
                throw invalidUri(masked, "unknown option '" + k + "' for " + scheme + ": stores; known options: "
                        + String.join(", ", new java.util.TreeSet<>(known)));
            }
        }
        return this;
    }

    /** A size option in bytes ({@code 4GiB}, {@code 512MiB}, {@code 1GB}, {@code 4096}), or the default. */
    public long sizeParam(String name, long defaultBytes) {
        String v = params.get(name);
        return v == null ? defaultBytes : parseSize(name, v, masked);
    }

    /** A duration option in milliseconds ({@code 500ms}, {@code 30s}, {@code 5m}, {@code 1h}; bare = ms). */
    public long durationMillisParam(String name, long defaultMillis) {
        String v = params.get(name);
        return v == null ? defaultMillis : parseDurationMillis("option " + name, v, masked);
    }

    /** Parses a duration such as {@code 500ms} or {@code 30s} into ms (bare = ms); {@code what} names it in errors. */
    public static long parseDurationMillis(String what, String v, String uriForErrors) {
        Matcher m = DURATION.matcher(v.trim());
        if (!m.matches()) {
            throw invalidUri(uriForErrors, what + "=" + v + " is not a duration such as 500ms, 30s or 5m");
        }
        long n = Long.parseLong(m.group(1));
        String unit = m.group(2) == null ? "ms" : m.group(2).toLowerCase(Locale.ROOT);
        return switch (unit) {
            case "s" -> n * 1000;
            case "m" -> n * 60_000;
            case "h" -> n * 3_600_000;
            case "d" -> n * 86_400_000;
            default -> n;
        };
    }

    /** An integer option, or the default. */
    public int intParam(String name, int defaultValue) {
        String v = params.get(name);
        if (v == null) {
            return defaultValue;
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw invalidUri(masked, "option " + name + "=" + v + " is not an integer");
        }
    }

    /** A boolean option ({@code true|false|1|0|yes|no}), or the default. */
    public boolean boolParam(String name, boolean defaultValue) {
        String v = params.get(name);
        if (v == null) {
            return defaultValue;
        }
        return switch (v.trim().toLowerCase(Locale.ROOT)) {
            case "true", "1", "yes", "" -> true;
            case "false", "0", "no" -> false;
            default -> throw invalidUri(masked, "option " + name + "=" + v + " is not true or false");
        };
    }

    /** Parses a byte size such as {@code 4GiB}; {@code what} names the value in errors. */
    public static long parseSize(String what, String v, String uriForErrors) {
        Matcher m = SIZE.matcher(v.trim());
        if (!m.matches()) {
            throw invalidUri(uriForErrors, what + "=" + v + " is not a size such as 4GiB, 512MiB or 1048576");
        }
        long n = Long.parseLong(m.group(1));
        String unit = m.group(2) == null ? "B" : m.group(2).toUpperCase(Locale.ROOT);
        long mult = switch (unit) {
            case "K", "KIB" -> 1L << 10;
            case "M", "MIB" -> 1L << 20;
            case "G", "GIB" -> 1L << 30;
            case "T", "TIB" -> 1L << 40;
            case "KB" -> 1_000L;
            case "MB" -> 1_000_000L;
            case "GB" -> 1_000_000_000L;
            case "TB" -> 1_000_000_000_000L;
            default -> 1L;
        };
        if (n > Long.MAX_VALUE / mult) {
            throw invalidUri(uriForErrors, what + "=" + v + " overflows 63 bits");
        }
        return n * mult;
    }

    /** The URI with the password and secret-like options replaced by {@code ***}. */
    public String masked() {
        return masked;
    }

    private String buildMasked() {
        StringBuilder sb = new StringBuilder(scheme).append(':');
        if (!hosts.isEmpty() || user != null) {
            sb.append("//");
            if (password != null) {
                sb.append(user == null ? "" : user).append(":***@");
            } else if (user != null) {
                sb.append("***@");
            }
            for (int i = 0; i < hosts.size(); i++) {
                sb.append(i == 0 ? "" : ",").append(hosts.get(i));
            }
        }
        sb.append(path);
        for (String inner : nested) {
            sb.append('[').append(maskRaw(inner)).append(']');
        }
        if (!params.isEmpty()) {
            sb.append('?');
            boolean first = true;
            for (Map.Entry<String, String> e : params.entrySet()) {
                sb.append(first ? "" : "&").append(e.getKey()).append('=')
                        .append(UriMasking.isSecretParam(e.getKey()) ? "***" : maskRaw(e.getValue()));
                first = false;
            }
        }
        return sb.toString();
    }

    @Override
    public String toString() {
        return masked;
    }
}
