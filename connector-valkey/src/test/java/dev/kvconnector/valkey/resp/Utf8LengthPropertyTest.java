package dev.kvconnector.valkey.resp;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;

/** The key length sent in a bulk header must equal the bytes that follow it, for any string. */
class Utf8LengthPropertyTest {
    @Property(tries = 2000)
    void utf8LengthEqualsTheEncodedLength(@ForAll String s) {
        assertEquals(s.getBytes(StandardCharsets.UTF_8).length, RespWriter.utf8Length(s));
    }
}
