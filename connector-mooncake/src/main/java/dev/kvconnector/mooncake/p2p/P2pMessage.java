package dev.kvconnector.mooncake.p2p;

/**
 * The notifications of the peer-to-peer protocol. Each is a transfer-engine notification whose name is the transfer
 * id and whose text is {@code kvc-p2p/1 KIND SENDER ARGS}, SENDER being the sender's segment name so the peer can
 * answer:
 * <ul>
 *   <li>P to D, after the bytes they describe: {@code L layer bytes sum} (a layer landed), {@code H bytes sum}
 *       (the hidden states landed), {@code C layers} (P's last word: nothing of this transfer is in flight any more),
 *       {@code A reason} (P aborted; also nothing in flight);</li>
 *   <li>D to P: {@code X reason} (D stopped waiting: write nothing more).</li>
 * </ul>
 *
 * @param kind the message kind
 * @param sender the sender's segment name
 * @param a the first number (layer, or bytes for {@code H}, layers for {@code C})
 * @param b the second number (bytes for {@code L}, the word sum for {@code H})
 * @param c the third number (the word sum for {@code L})
 * @param text the reason of {@code A} and {@code X}, else ""
 */
record P2pMessage(Kind kind, String sender, long a, long b, long c, String text) {
    static final String PREFIX = "kvc-p2p/1 ";

    /** What a message says. */
    enum Kind { LAYER, HIDDEN, COMMIT, ABORT, CANCEL }

    static String layer(String sender, int layer, long bytes, int sum) {
        return layer(new StringBuilder(), sender, layer, bytes, sum).toString();
    }

    /** {@link #layer(String, int, long, int)} written into {@code out} (emptied first), allocating nothing. */
    static StringBuilder layer(StringBuilder out, String sender, int layer, long bytes, int sum) {
        out.setLength(0);
        return out.append(PREFIX).append("L ").append(sender).append(' ').append(layer).append(' ').append(bytes)
                .append(' ').append(Integer.toUnsignedLong(sum));
    }

    static String hidden(String sender, long bytes, int sum) {
        return PREFIX + "H " + sender + " " + bytes + " " + Integer.toUnsignedString(sum);
    }

    static String commit(String sender, int layers) {
        return PREFIX + "C " + sender + " " + layers;
    }

    static String abort(String sender, String reason) {
        return PREFIX + "A " + sender + " " + reason;
    }

    static String cancel(String sender, String reason) {
        return PREFIX + "X " + sender + " " + reason;
    }

    /** The word sum carried by {@code L} and {@code H}. */
    int sum() {
        return (int) (kind == Kind.LAYER ? c : b);
    }

    /** Parses {@code text}, or returns null when it is not a message of this protocol or is malformed. */
    static P2pMessage parse(String text) {
        if (text == null || !text.startsWith(PREFIX)) {
            return null;
        }
        String[] f = text.substring(PREFIX.length()).split(" ", text.startsWith(PREFIX + "A ")
                || text.startsWith(PREFIX + "X ") ? 3 : -1);
        if (f.length < 2 || f[0].length() != 1) {
            return null;
        }
        try {
            return switch (f[0].charAt(0)) {
                case 'L' -> f.length != 5 ? null : new P2pMessage(Kind.LAYER, f[1], Long.parseLong(f[2]),
                        Long.parseLong(f[3]), Integer.parseUnsignedInt(f[4]), "");
                case 'H' -> f.length != 4 ? null : new P2pMessage(Kind.HIDDEN, f[1], Long.parseLong(f[2]),
                        Integer.parseUnsignedInt(f[3]), 0, "");
                case 'C' -> f.length != 3 ? null : new P2pMessage(Kind.COMMIT, f[1], Long.parseLong(f[2]), 0, 0, "");
                case 'A' -> new P2pMessage(Kind.ABORT, f[1], 0, 0, 0, f.length > 2 ? f[2] : "");
                case 'X' -> new P2pMessage(Kind.CANCEL, f[1], 0, 0, 0, f.length > 2 ? f[2] : "");
                default -> null;
            };
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
