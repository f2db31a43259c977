package dev.kvconnector.valkey;

import java.nio.charset.StandardCharsets;

/**
 * Key to cluster slot: CRC16 (XMODEM) of the key's UTF-8 bytes modulo 16384, where a key with a non-empty
 * {@code {...}} hashes only the text inside the first braces (a hash tag), so {@code {req-42}:L00} and
 * {@code {req-42}:L31} share a slot. Allocation-free for ASCII keys.
 */
final class ClusterSlots {
    /** Slots in a cluster. */
    static final int SLOTS = 16384;
    private static final int[] TABLE = new int[256];

    static {
        for (int i = 0; i < 256; i++) {
            int crc = i << 8;
            for (int b = 0; b < 8; b++) {
                crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
            }
            TABLE[i] = crc & 0xffff;
        }
    }

    private ClusterSlots() {
    }

    /** The slot of {@code key}. */
    static int slot(String key) {
        int n = key.length();
        for (int i = 0; i < n; i++) {
            if (key.charAt(i) >= 0x80) {
                return slot(key.getBytes(StandardCharsets.UTF_8));
            }
        }
        int start = 0;
        int end = n;
        int open = key.indexOf('{');
        if (open >= 0) {
            int close = key.indexOf('}', open + 1);
            if (close > open + 1) {
                start = open + 1;
                end = close;
            }
        }
        int crc = 0;
        for (int i = start; i < end; i++) {
            crc = ((crc << 8) ^ TABLE[((crc >>> 8) ^ key.charAt(i)) & 0xff]) & 0xffff;
        }
        return crc & (SLOTS - 1);
    }

    /** The slot of a key given as UTF-8 bytes. */
    static int slot(byte[] key) {
        int start = 0;
        int end = key.length;
        for (int i = 0; i < key.length; i++) {
            if (key[i] == '{') {
                for (int j = i + 1; j < key.length; j++) {
                    if (key[j] == '}') {
                        if (j > i + 1) {
                            start = i + 1;
                            end = j;
                        }
                        break;
                    }
                }
                break;
            }
        }
        int crc = 0;
        for (int i = start; i < end; i++) {
            crc = ((crc << 8) ^ TABLE[((crc >>> 8) ^ key[i]) & 0xff]) & 0xffff;
        }
        return crc & (SLOTS - 1);
    }
}
