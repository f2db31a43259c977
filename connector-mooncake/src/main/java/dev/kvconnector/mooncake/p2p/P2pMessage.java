package dev.kvconnector.mooncake.p2p;

/**
 * The notifications of the peer-to-peer protocol. Each is a transfer-engine notification whose name is the transfer
 * id and whose text is {@code kvc-p2p/1 KIND[@GENERATION] SENDER ARGS}, SENDER being the sender's segment name so the
 * peer can answer, and GENERATION (absent: 0) the producer generation of D's destination that P writes
 * ({@link P2pDestination#generation()}):
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
 * @param generation the producer generation the message belongs to (0 for D's messages)
 */
record P2pMessage(Kind kind, String sender, long a, long b, long c, String text, int generation) {
    static final String PREFIX = "kvc-p2p/1 ";

    /** What a message says. */
    enum Kind { LAYER, HIDDEN, COMMIT, ABORT, CANCEL }

    /** A layer message of {@code generation} written into {@code out} (emptied first), allocating nothing. */
    static StringBuilder layer(StringBuilder out, int generation, String sender, int layer, long bytes, int sum) {
        out.setLength(0);
        out.append(PREFIX).append('L');
        if (generation != 0) {
            out.append('@').append(generation);
        }
        return out.append(' ').append(sender).append(' ').append(layer).append(' ').append(bytes).append(' ')
                .append(Integer.toUnsignedLong(sum));
    }

    static String hidden(int generation, String sender, long bytes, int sum) {
        return PREFIX + kind('H', generation) + sender + " " + bytes + " " + Integer.toUnsignedString(sum);
    }

    static String commit(int generation, String sender, int layers) {
        return PREFIX + kind('C', generation) + sender + " " + layers;
    }

    static String abort(int generation, String sender, String reason) {
        return PREFIX + kind('A', generation) + sender + " " + reason;
    }

    private static String kind(char kind, int generation) {
        return generation == 0 ? kind + " " : kind + "@" + generation + " ";
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
        String body = text.substring(PREFIX.length());
        boolean withReason = body.startsWith("A") || body.startsWith("X");
        String[] f = body.split(" ", withReason ? 3 : -1);
        if (f.length < 2 || f[0].isEmpty() || f[0].length() > 1 && f[0].charAt(1) != '@') {
            return null;
        }
        try {
            int g = f[0].length() == 1 ? 0 : Integer.parseInt(f[0], 2, f[0].length(), 10);
            if (g < 0) {
                return null;
            }
            return switch (f[0].charAt(0)) {
                case 'L' -> f.length != 5 ? null : new P2pMessage(Kind.LAYER, f[1], Long.parseLong(f[2]),
                        Long.parseLong(f[3]), Integer.parseUnsignedInt(f[4]), "", g);
                case 'H' -> f.length != 4 ? null : new P2pMessage(Kind.HIDDEN, f[1], Long.parseLong(f[2]),
                        Integer.parseUnsignedInt(f[3]), 0, "", g);
                case 'C' -> f.length != 3 ? null : new P2pMessage(Kind.COMMIT, f[1], Long.parseLong(f[2]), 0, 0, "",
                        g);
                case 'A' -> new P2pMessage(Kind.ABORT, f[1], 0, 0, 0, f.length > 2 ? f[2] : "", g);
                case 'X' -> new P2pMessage(Kind.CANCEL, f[1], 0, 0, 0, f.length > 2 ? f[2] : "", g);
                default -> null;
            };
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
