package dev.kvconnector.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.List;
import org.junit.jupiter.api.Test;

class StoreUriTest {

    @Test
    void parsesUserPasswordHostPortPathAndOptions() {
        StoreUri u = StoreUri.parse("valkey://alice:s3cr%40t@10.0.0.5:6380/2?ttl=30s&pool=4");
        assertEquals("valkey", u.scheme());
        assertEquals("alice", u.user());
        assertEquals("s3cr@t", u.password());
        assertEquals(List.of(new StoreUri.HostPort("10.0.0.5", 6380)), u.hosts());
        assertEquals("/2", u.path());
        assertEquals(30_000, u.durationMillisParam("ttl", 0));
        assertEquals(4, u.intParam("pool", 1));
    }

    @Test
    void maskedFormNeverShowsSecrets() {
        StoreUri u = StoreUri.parse("rediss://bob:hunter2@h:1?password=other&token=abc&ttl=5");
        assertFalse(u.masked().contains("hunter2"), u.masked());
        assertFalse(u.toString().contains("other"));
        assertFalse(u.toString().contains("abc"));
        assertTrue(u.masked().startsWith("rediss://bob:***@h:1"), u.masked());
        StoreUri nested = StoreUri.parse("mooncake://m:50051?metadata=redis://meta:hunter3@h:6379");
        assertFalse(nested.masked().contains("hunter3"), nested.masked());
        assertTrue(nested.masked().contains("metadata=redis://meta:***@h:6379"), nested.masked());
        KVException e = assertThrows(KVException.class, () -> StoreUri.parse("valkey://u:hunter2@h:99999"));
        assertFalse(e.getMessage().contains("hunter2"), e.getMessage());
    }

    /** Passwords holding every delimiter, a literal '%', '+', a space, and non-ASCII characters. */
    private static final List<String> HARD_PASSWORDS = List.of("a/b", "a?b", "a#b", "a@b", "a:b", "a%b", "a+b",
            "a b", "p\u00e4ssw\u00f6rd", "\u5bc6\u7801\ud83d\udd11", "/?#@:%+ \u00e9&=", "%41");

    @Test
    void percentEncodedPasswordsDecodeExactlyInEveryScheme() {
        for (String scheme : List.of("valkey", "valkeys", "rediss", "valkey+cluster", "lm", "mooncake",
                "lmcache+valkey", "lmcache+mooncake")) {
            for (String pw : HARD_PASSWORDS) {
                String text = scheme + "://alice:" + StoreUri.encode(pw) + "@h1:6379,h2:6380/0?ttl=1s";
                StoreUri u = StoreUri.parse(text);
                assertEquals(pw, u.password(), text);
                assertEquals("alice", u.user(), text);
                assertEquals(List.of(new StoreUri.HostPort("h1", 6379), new StoreUri.HostPort("h2", 6380)),
                        u.hosts(), text);
                assertEquals("/0", u.path(), text);
                assertEquals("1s", u.param("ttl"), text);
                assertEquals(scheme + "://alice:***@h1:6379,h2:6380/0?ttl=1s", u.masked(), text);
            }
        }
    }

    @Test
    void rawPlusSpaceColonAtAndNonAsciiStayAsWritten() {
        StoreUri u = StoreUri.parse("valkey://:p@ss:w+rd \u00e9\u5bc6@h:1");
        assertEquals("p@ss:w+rd \u00e9\u5bc6", u.password());
        assertEquals(null, u.user());
        assertEquals(List.of(new StoreUri.HostPort("h", 1)), u.hosts());
        assertEquals("a+b", StoreUri.parse("memory:?x=a+b").param("x"));
        assertEquals("/kv", StoreUri.parse("shm:/kv?capacity=1MiB").path());
        assertEquals("a b", StoreUri.parse("valkey://h?password=a%20b").param("password"));
    }

    @Test
    void rawDelimitersInThePasswordAreAnErrorThatNeverShowsIt() {
        for (String pw : List.of("S3CR/ET", "S3CR?ET", "S3CR#ET", "S3/CR?ET#X", "S3CR/ET=1", "S3CR?a=b")) {
            for (String text : List.of("valkey://:" + pw + "@h:6379", "valkey://alice:" + pw + "@h:6379/0?ttl=1s",
                    "mooncake://u:" + pw + "@m:50051?local_hostname=10.0.0.1", "lm://u:" + pw + "@h",
                    "lmcache+valkey+cluster://u:" + pw + "@a:1,b:2")) {
                KVException e = assertThrows(KVException.class, () -> StoreUri.parse(text), text);
                assertEquals(ErrorCode.INVALID_URI, e.code(), text);
                assertFalse(e.getMessage().contains("S3"), e.getMessage());
                assertFalse(e.getMessage().contains("CR"), e.getMessage());
                assertTrue(e.getMessage().contains("%2F"), e.getMessage());
            }
        }
    }

    @Test
    void badPercentEncodingIsAnInvalidUriThatNeverShowsTheSecret() {
        for (String text : List.of("valkey://:S3CR%zzET@h", "valkey://:S3CRET%@h", "valkey://:S3CRET%4@h",
                "valkey://u:S3CR%FFET@h", "valkeys://h?truststore-password=S3CR%zzET",
                "rediss://h?keystore-password=S3CR%C3ET", "valkey://S3CR%zzET@h")) {
            KVException e = assertThrows(KVException.class, () -> StoreUri.parse(text), text);
            assertEquals(ErrorCode.INVALID_URI, e.code(), text);
            assertFalse(e.getMessage().contains("S3CR"), e.getMessage());
            assertTrue(e.getMessage().contains("%25") || e.getMessage().contains("UTF-8"), e.getMessage());
        }
        KVException plain = assertThrows(KVException.class, () -> StoreUri.parse("shm:/kv?capacity=1%zzMiB"));
        assertTrue(plain.getMessage().contains("1%zzMiB"), plain.getMessage());
    }

    @Test
    void secretsAreMaskedInEveryErrorWhateverTheyHold() {
        for (String pw : HARD_PASSWORDS) {
            String secret = "Z9" + StoreUri.encode(pw);
            for (String text : List.of("valkey://u:" + secret + "@h:99999", "valkey://u:" + secret + "@h:6x",
                    "valkey://u:" + secret + "@h?a=1&a=2", "mooncake://u:" + secret + "@:1",
                    "lm://u:" + secret + "@h,?x=%zz", "valkey://h?password=" + secret + "&password=1",
                    "x://h?metadata=redis://meta:" + secret + "@h:1&m=%zz")) {
                KVException e = assertThrows(KVException.class, () -> StoreUri.parse(text), text);
                assertFalse(e.getMessage().contains("Z9"), e.getMessage());
            }
        }
    }

    @Test
    void maskedFormHidesALoneUserInfoAndSecretLookingOptions() {
        assertEquals("valkey://***@h:1", StoreUri.parse("valkey://tok3n@h:1").masked());
        String m = StoreUri.parse("memory:?db-password=x1&api_token=x2&client-secret=x3&x=4").masked();
        assertEquals("memory:?db-password=***&api_token=***&client-secret=***&x=4", m);
        assertEquals("valkey://***@b", StoreUri.maskRaw("valkey://a/b:c@b"));
        assertEquals("m://h?metadata=redis://u:***@h:1", StoreUri.maskRaw("m://h?metadata=redis://u:p/w?@h:1"));
    }

    @Test
    void encodeRoundTripsThroughParse() {
        for (String v : HARD_PASSWORDS) {
            assertEquals(v, StoreUri.parse("memory:?" + StoreUri.encode(v) + "=" + StoreUri.encode(v)).param(v));
        }
        assertEquals("a%2Bb%20c~", StoreUri.encode("a+b c~"));
    }

    @Test
    void opaqueAndClusterFormsParse() {
        assertEquals("/kv", StoreUri.parse("shm:/kv?capacity=4GiB").path());
        assertEquals(4L << 30, StoreUri.parse("shm:/kv?capacity=4GiB").sizeParam("capacity", 0));
        assertEquals(2, StoreUri.parse("valkey+cluster://a:7000,b:7001").hosts().size());
        assertEquals(0, StoreUri.parse("memory:").hosts().size());
        assertEquals(new StoreUri.HostPort("::1", 6379), StoreUri.parse("valkey://[::1]:6379").hosts().getFirst());
    }

    @Test
    void sizesAndDurationsUseBinaryAndDecimalUnits() {
        assertEquals(512L << 20, StoreUri.parseSize("x", "512MiB", "u"));
        assertEquals(1_000_000_000L, StoreUri.parseSize("x", "1GB", "u"));
        assertEquals(4096, StoreUri.parseSize("x", "4096", "u"));
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> StoreUri.parseSize("x", "99999999999TiB", "u")).code());
        assertEquals(120_000, StoreUri.parse("m:?t=2m").durationMillisParam("t", 0));
    }

    @Test
    void malformedUrisNameTheProblem() {
        assertTrue(assertThrows(KVException.class, () -> StoreUri.parse("valkey://h:63x79")).getMessage().contains("port"));
        assertTrue(assertThrows(KVException.class, () -> StoreUri.parse("")).getMessage().contains("empty"));
        assertTrue(assertThrows(KVException.class, () -> StoreUri.parse("/dev/shm/x")).getMessage().contains("scheme"));
        assertTrue(assertThrows(KVException.class, () -> StoreUri.parse("m:?a=1&a=2")).getMessage().contains("twice"));
    }

    @Test
    void unknownSchemeListsTheSchemesOnTheClassPath() {
        KVException e = assertThrows(KVException.class, () -> KVStores.open("etcd://h:2379"));
        assertEquals(ErrorCode.UNKNOWN_STORE, e.code());
        assertTrue(e.getMessage().contains("memory"), e.getMessage());
        assertTrue(e.getMessage().contains("etcd"), e.getMessage());
    }
}
