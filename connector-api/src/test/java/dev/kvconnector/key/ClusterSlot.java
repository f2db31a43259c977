package dev.kvconnector.key;

import java.nio.charset.StandardCharsets;

/** Valkey/Redis cluster slot of a key (CRC16/XMODEM of the hash tag, mod 16384), as the cluster spec defines it. */
final class ClusterSlot {
    private static final int SLOTS = 16384;

    private ClusterSlot() {
    }

    /** The slot of {@code key}. */
    static int of(String key) {
        return crc16(hashTag(key).getBytes(StandardCharsets.UTF_8)) % SLOTS;
    }

    /** The part of the key that is hashed: the text between the first '{' and the next '}', if non-empty. */
    static String hashTag(String key) {
        int open = key.indexOf('{');
        if (open >= 0) {
            int close = key.indexOf('}', open + 1);
            if (close > open + 1) {
                return key.substring(open + 1, close);
            }
        }
        return key;
    }

    static int crc16(byte[] bytes) {
        int crc = 0;
        for (byte b : bytes) {
            crc ^= (b & 0xFF) << 8;
            for (int i = 0; i < 8; i++) {
                crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
            }
        }
        return crc & 0xFFFF;
    }
}
