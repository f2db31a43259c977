package dev.kvconnector.key.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.security.MessageDigest;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/**
 * The pickle and CBOR writers byte for byte. Expected pickles were printed by CPython 3.11.7's
 * {@code pickle.dumps(value, protocol=5)}; expected CBOR follows RFC 8949's deterministic encoding, which
 * {@code cbor2.dumps(canonical=True)} writes for these types.
 */
class VllmPythonEncodingTest {
    private static final HexFormat HEX = HexFormat.of();

    @Test
    void intsPickleWithTheOpcodePythonPicksForEachRange() {
        Object[][] cases = {
            {0L, "80054b002e"}, {128L, "80054b802e"}, {255L, "80054bff2e"},
            {256L, "80059504000000000000004d00012e"}, {32768L, "80059504000000000000004d00802e"},
            {65535L, "80059504000000000000004dffff2e"}, {65536L, "80059506000000000000004a000001002e"},
            {2147483647L, "80059506000000000000004affffff7f2e"}, {-1L, "80059506000000000000004affffffff2e"},
            {-128L, "80059506000000000000004a80ffffff2e"}, {-129L, "80059506000000000000004a7fffffff2e"},
            {-32769L, "80059506000000000000004aff7fffff2e"}, {-2147483648L, "80059506000000000000004a000000802e"},
            {2147483648L, "80059508000000000000008a0500000080002e"},
            {-2147483649L, "80059508000000000000008a05ffffff7fff2e"},
            {1L << 40, "80059509000000000000008a060000000000012e"},
            {-(1L << 40), "80059509000000000000008a060000000000ff2e"},
            {1L << 55, "8005950b000000000000008a0800000000000080002e"},
            {Long.MAX_VALUE, "8005950b000000000000008a08ffffffffffffff7f2e"},
            {Long.MIN_VALUE, "8005950b000000000000008a0800000000000000802e"},
        };
        for (Object[] c : cases) {
            Pickle5Writer w = new Pickle5Writer();
            w.integer((Long) c[0]);
            assertEquals(c[1], HEX.formatHex(w.finish()), "pickle of " + c[0]);
        }
    }

    @Test
    void tuplesOfZeroToFourItemsPickleAsPythonDoes() {
        String[] expected = {"8005292e", "80059505000000000000004b0085942e", "80059507000000000000004b004b0186942e",
            "80059509000000000000004b004b014b0287942e", "8005950c00000000000000284b004b014b024b0374942e"};
        for (int n = 0; n < expected.length; n++) {
            Pickle5Writer w = new Pickle5Writer();
            w.beginTuple(n);
            for (int i = 0; i < n; i++) {
                w.integer(i);
            }
            w.endTuple(n);
            assertEquals(expected[n], HEX.formatHex(w.finish()), "tuple(range(" + n + "))");
        }
    }

    @Test
    void stringsPickleByUtf8LengthAndTheSeedStringMatchesTheSpec() {
        Pickle5Writer seed = new Pickle5Writer();
        seed.str("vllm-none-hash");
        assertEquals("80059512000000000000008c0e766c6c6d2d6e6f6e652d68617368942e", HEX.formatHex(seed.finish()));
        Pickle5Writer pair = new Pickle5Writer();
        pair.beginTuple(2);
        pair.str("my-lora");
        pair.str("tenant-salt");
        pair.endTuple(2);
        assertEquals("8005951b000000000000008c076d792d6c6f7261948c0b74656e616e742d73616c749486942e",
                HEX.formatHex(pair.finish()));
        Pickle5Writer wide = new Pickle5Writer();
        wide.str("é".repeat(200));
        assertEquals("80059597010000000000005890010000", HEX.formatHex(wide.finish()).substring(0, 32),
                "400 UTF-8 bytes take BINUNICODE with a 4-byte length");
    }

    @Test
    void picklesOver64KiBSplitIntoFramesAsPythonDoes() throws Exception {
        byte[] parent = new byte[32];
        java.util.Arrays.fill(parent, (byte) 7);
        int[] tokens = new int[20000];
        java.util.Arrays.setAll(tokens, i -> 100000 + i);
        assertEquals("f48601bbf300c938e39c1f7c0cfff96d4db287c44a743a2a85a67fafffd8d54a",
                sha256(blockPickle(parent, tokens, null)), "(parent, tuple(range(100000, 120000)), None)");
        int[] fives = new int[40000];
        java.util.Arrays.fill(fives, 5);
        assertEquals("41ea645f05e97ae6f500ccd244df760bb055d5df9896730a075706f4dcaa2903",
                sha256(blockPickle(parent, fives, new String[] {"y".repeat(300), "s"})), "(parent, (5,)*40000, (y*300, 's'))");
        assertEquals("360e8b1adec13f58fedb79a10b1e521438160a05f4284d47bd307ff6ed7af3d3",
                sha256(blockPickle(parent, new int[] {1, 2}, new String[] {"x".repeat(70000)})),
                "a 70000-byte str goes outside the frames");
    }

    @Test
    void cborHeadsAreShortestForEveryIntRange() {
        Object[][] cases = {
            {0L, "00"}, {23L, "17"}, {24L, "1818"}, {255L, "18ff"}, {256L, "190100"}, {65535L, "19ffff"},
            {65536L, "1a00010000"}, {4294967295L, "1affffffff"}, {4294967296L, "1b0000000100000000"},
            {-1L, "20"}, {-24L, "37"}, {-25L, "3818"}, {-2147483648L, "3a7fffffff"},
        };
        for (Object[] c : cases) {
            CanonicalCborWriter w = new CanonicalCborWriter();
            w.integer((Long) c[0]);
            assertEquals(c[1], HEX.formatHex(w.finish()), "cbor of " + c[0]);
        }
    }

    @Test
    void cborOfTheHashTupleUsesArrayBytesTextAndNull() {
        CanonicalCborWriter w = new CanonicalCborWriter();
        w.beginTuple(3);
        w.bytes(new byte[] {1, 2});
        w.beginTuple(24);
        for (int i = 0; i < 24; i++) {
            w.integer(1);
        }
        w.endTuple(24);
        w.none();
        w.endTuple(3);
        assertEquals("83420102" + "9818" + "01".repeat(24) + "f6", HEX.formatHex(w.finish()));
        CanonicalCborWriter s = new CanonicalCborWriter();
        s.str("vllm-none-hash");
        assertEquals("6e766c6c6d2d6e6f6e652d68617368", HEX.formatHex(s.finish()));
    }

    private static byte[] blockPickle(byte[] parent, int[] tokens, String[] extra) {
        Pickle5Writer w = new Pickle5Writer();
        w.beginTuple(3);
        w.bytes(parent);
        w.beginTuple(tokens.length);
        for (int t : tokens) {
            w.integer(t);
        }
        w.endTuple(tokens.length);
        if (extra == null) {
            w.none();
        } else {
            w.beginTuple(extra.length);
            for (String s : extra) {
                w.str(s);
            }
            w.endTuple(extra.length);
        }
        w.endTuple(3);
        return w.finish();
    }

    private static String sha256(byte[] b) throws Exception {
        return HEX.formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }
}
