package dev.kvconnector.store;

import java.util.Locale;
import java.util.regex.Pattern;

/** Which parts of a store URI are secrets, and how text that may hold them is masked. */
final class UriMasking {
    private static final Pattern SECRET_OPTION = Pattern.compile("([?&][^=&]*(?:pass|secret|token)[^=&]*=)[^&]*",
            Pattern.CASE_INSENSITIVE);

    private UriMasking() {
    }

    /**
     * Whether an option's value is a secret: its name holds {@code pass}, {@code secret} or {@code token}
     * ({@code password}, {@code truststore-password}, {@code api_token}, ...), in any case.
     */
    static boolean isSecretParam(String name) {
        String n = name.toLowerCase(Locale.ROOT);
        return n.contains("pass") || n.contains("secret") || n.contains("token");
    }

    /**
     * Masks the user info of every {@code //user:password@} inside text that may not parse: malformed URIs, and
     * URIs nested in option values. It errs towards masking too much: after each {@code //}, everything up to the
     * last {@code @} before the next {@code //} is user info, whatever characters it holds; the user name stays
     * only when it is plain (no {@code / ? # & =}), and a user info without {@code :} is masked whole. The value of
     * every option whose name holds {@code pass}, {@code secret} or {@code token} is masked too.
     */
    static String maskRaw(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        int from = 0;
        int start;
        while ((start = s.indexOf("//", from)) >= 0) {
            int body = start + 2;
            int next = s.indexOf("//", body);
            int limit = next < 0 ? s.length() : next;
            int at = s.lastIndexOf('@', limit - 1);
            sb.append(s, from, body);
            if (at >= body) {
                String ui = s.substring(body, at);
                int c = ui.indexOf(':');
                boolean plainUser = c >= 0 && StoreUri.indexOfAny(ui.substring(0, c), "/?#&=", 0) < 0;
                sb.append(plainUser ? ui.substring(0, c) + ":***" : "***");
                from = at;
            } else {
                from = body;
            }
        }
        return SECRET_OPTION.matcher(sb.append(s, from, s.length())).replaceAll("$1***");
    }
}
