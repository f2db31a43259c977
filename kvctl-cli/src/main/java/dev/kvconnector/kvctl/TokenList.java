package dev.kvconnector.kvctl;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Parses token ids written as integers separated by commas, spaces or newlines. */
final class TokenList {
    private TokenList() {
    }

    static int[] parse(String text, String source) {
        String[] parts = text.trim().split("[,\\s]+");
        if (parts.length == 1 && parts[0].isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "no tokens in " + source).build();
        }
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            try {
                out[i] = Integer.parseInt(parts[i]);
            } catch (NumberFormatException e) {
                if (parts[i].matches("[+-]?\\d+")) {
                    throw KVException.of(ErrorCode.INVALID_ARGUMENT, "token " + (i + 1) + " of " + source + " is "
                            + parts[i] + ", outside int32").hint("token ids are " + Integer.MIN_VALUE + ".."
                            + Integer.MAX_VALUE).build();
                }
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "token " + (i + 1) + " of " + source + " is '" + parts[i]
                        + "', not an integer").hint("tokens are integers separated by commas, spaces or newlines").build();
            }
        }
        return out;
    }

    static int[] fromFile(Path file) {
        try {
            return parse(Files.readString(file), file.toString());
        } catch (IOException e) {
            throw KVException.of(ErrorCode.IO_ERROR, "cannot read tokens file " + file + ": " + ObjectFiles.reason(e))
                    .build();
        }
    }
}
