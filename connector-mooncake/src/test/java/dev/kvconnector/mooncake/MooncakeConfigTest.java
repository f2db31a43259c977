package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The mooncake:// URI and mooncake.json, and the validation of the mistakes real users made. */
class MooncakeConfigTest {
    private static final String BASE = "mooncake://127.0.0.1:50051?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1";

    @TempDir
    Path dir;

    private static MooncakeConfig parse(String uri) {
        return MooncakeConfig.from(StoreUri.parse(uri), Map.of());
    }

    private static KVException invalid(String uri, Map<String, String> env) {
        return assertThrows(KVException.class, () -> MooncakeConfig.from(StoreUri.parse(uri), env));
    }

    @Test
    void uriGivesEveryFieldAndVllmDefaultsFillTheRest() {
        MooncakeConfig c = parse(BASE);
        assertEquals("127.0.0.1:50051", c.masterServerAddress());
        assertEquals("P2PHANDSHAKE", c.metadataServer());
        assertEquals("127.0.0.1", c.localHostname());
        assertEquals("tcp", c.protocol());
        assertEquals("", c.deviceName());
        assertEquals(3_355_443_200L, c.globalSegmentBytes());
        assertEquals(1L << 30, c.localBufferBytes());
        assertEquals(1, c.replicas());
        assertNull(c.library());
        assertEquals(LeasePolicy.WAIT, c.leasePolicy());
        assertEquals(64L << 20, c.stagingBytes());
        assertEquals(8L << 20, c.stagingSlotBytes());
        assertNull(c.configFile());
    }

    @Test
    void gpuDirectDefaultsToOnOverRdmaAndOffOverTcpAndCanBeSet() {
        assertEquals(false, parse(BASE).gpuDirect());
        assertEquals(true, parse(BASE + "&protocol=rdma").gpuDirect());
        assertEquals(false, parse(BASE + "&protocol=rdma&gpu-direct=false").gpuDirect());
        assertEquals(true, parse(BASE + "&gpu-direct=true").gpuDirect());
        KVException e = invalid(BASE + "&gpu-direct=maybe", Map.of());
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertTrue(e.getMessage().contains("gpu-direct=maybe"), e.getMessage());
    }

    @Test
    void uriOptionsAreParsedWithUnits() {
        MooncakeConfig c = parse("mooncake://10.0.0.5:50051?metadata=http://10.0.0.5:8080/metadata"
                + "&local_hostname=10.0.0.7:13000&protocol=RDMA&device=mlx5_0,mlx5_1&segment=2GiB&buffer=512MiB"
                + "&replicas=2&library=/opt/lib.so&staging=16MiB&staging-slots=2&lease-policy=force&lease-wait=2s"
                + "&full-retries=3&full-backoff=10ms");
        assertEquals("http://10.0.0.5:8080/metadata", c.metadataServer());
        assertEquals("10.0.0.7:13000", c.localHostname());
        assertEquals("rdma", c.protocol());
        assertEquals("mlx5_0,mlx5_1", c.deviceName());
        assertEquals(2L << 30, c.globalSegmentBytes());
        assertEquals(512L << 20, c.localBufferBytes());
        assertEquals(2, c.replicas());
        assertEquals("/opt/lib.so", c.library());
        assertEquals(8L << 20, c.stagingSlotBytes());
        assertEquals(LeasePolicy.FORCE, c.leasePolicy());
        assertEquals(2000, c.leaseWaitMillis());
        assertEquals(3, c.fullRetries());
        assertEquals(10, c.fullBackoffMillis());
    }

    @Test
    void mooncakeJsonFillsTheFieldsAndUriOptionsOverrideIt() throws IOException {
        Path json = dir.resolve("mooncake.json");
        Files.writeString(json, """
                {"local_hostname": "10.0.0.7", "metadata_server": "http://10.0.0.5:8080/metadata",
                 "global_segment_size": 1073741824, "local_buffer_size": "256MiB", "protocol": "tcp",
                 "device_name": "", "master_server_address": "10.0.0.5:50051", "extra_field": 1}""");
        Map<String, String> env = Map.of(MooncakeConfig.ENV_CONFIG_PATH, json.toString());
        MooncakeConfig fromFile = MooncakeConfig.from(StoreUri.parse("mooncake:"), env);
        assertEquals("10.0.0.5:50051", fromFile.masterServerAddress());
        assertEquals("10.0.0.7", fromFile.localHostname());
        assertEquals(1L << 30, fromFile.globalSegmentBytes());
        assertEquals(256L << 20, fromFile.localBufferBytes());
        assertEquals(json, fromFile.configFile());

        MooncakeConfig overridden = MooncakeConfig.from(
                StoreUri.parse("mooncake://10.0.0.6:50052?local_hostname=10.0.0.8&segment=4096"), env);
        assertEquals("10.0.0.6:50052", overridden.masterServerAddress());
        assertEquals("10.0.0.8", overridden.localHostname());
        assertEquals(4096, overridden.globalSegmentBytes());
        assertEquals("http://10.0.0.5:8080/metadata", overridden.metadataServer());
    }

    @Test
    void anEmptyLocalHostnameIsRejectedBeforeSetup() {
        KVException e = invalid("mooncake://127.0.0.1:50051?metadata=P2PHANDSHAKE", Map.of());
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("local_hostname is empty"), e.getMessage());
        assertTrue(e.hint().contains("IP address"), e.hint());
        assertEquals(ErrorCode.INVALID_CONFIG,
                invalid("mooncake://127.0.0.1:50051?metadata=P2PHANDSHAKE&local_hostname=", Map.of()).code());
    }

    @Test
    void aMasterWithoutAPortIsRejectedWithTheDefaultPortInTheHint() {
        KVException e = invalid("mooncake://10.0.0.5?metadata=P2PHANDSHAKE&local_hostname=10.0.0.7", Map.of());
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("'10.0.0.5' has no port"), e.getMessage());
        assertTrue(e.hint().contains("10.0.0.5:50051"), e.hint());
    }

    @Test
    void aMasterWithoutAPortInMooncakeJsonIsRejectedToo() throws IOException {
        Path json = dir.resolve("m.json");
        Files.writeString(json, "{\"local_hostname\":\"10.0.0.7\",\"metadata_server\":\"P2PHANDSHAKE\","
                + "\"master_server_address\":\"10.0.0.5\"}");
        KVException e = invalid("mooncake:", Map.of(MooncakeConfig.ENV_CONFIG_PATH, json.toString()));
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.hint().contains("10.0.0.5:50051"), e.hint());
    }

    @Test
    void aLoopbackLocalHostnameWithARemoteMasterIsRejected() {
        KVException e = invalid("mooncake://10.0.0.5:50051?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1", Map.of());
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("loopback"), e.getMessage());
        assertTrue(e.hint().contains("10.0.0.5"), e.hint());
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(
                "mooncake://master.example:50051?metadata=P2PHANDSHAKE&local_hostname=localhost:13000", Map.of()).code());
        parse("mooncake://localhost:50051?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1");
        parse("mooncake://[::1]:50051?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1");
    }

    @Test
    void noMasterAtAllNamesBothPlacesToSetIt() {
        KVException e = invalid("mooncake:?metadata=P2PHANDSHAKE&local_hostname=10.0.0.7", Map.of());
        assertTrue(e.hint().contains("master_server_address") && e.hint().contains("mooncake://"), e.hint());
    }

    @Test
    void aMissingMetadataServerIsRejected() {
        KVException e = invalid("mooncake://127.0.0.1:50051?local_hostname=127.0.0.1", Map.of());
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.hint().contains("P2PHANDSHAKE"), e.hint());
    }

    @Test
    void badOptionValuesAreRejected() {
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(BASE + "&protocol=udp", Map.of()).code());
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(BASE + "&replicas=0", Map.of()).code());
        assertEquals(ErrorCode.INVALID_URI, invalid(BASE + "&lease-policy=maybe", Map.of()).code());
        assertEquals(ErrorCode.INVALID_URI, invalid(BASE + "&segment=lots", Map.of()).code());
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(BASE + "&staging=4096&staging-slots=2", Map.of()).code());
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(BASE + "&staging-slots=0", Map.of()).code());
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(BASE + "&full-retries=-1", Map.of()).code());
        assertEquals(ErrorCode.INVALID_CONFIG,
                invalid("mooncake://a:1,b:2?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1", Map.of()).code());
    }

    @Test
    void credentialsInTheMasterAddressAreRefusedAndNeverShown() {
        KVException e = invalid("mooncake://u:S3CRET@127.0.0.1:50051?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1",
                Map.of());
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertFalse(e.getMessage().contains("S3CRET"), e.getMessage());
    }

    @Test
    void aMetadataPasswordWithRawDelimitersIsMaskedInTheSetupContext() {
        assertEquals("redis://u:***@h:6379", MooncakeStore.withoutPassword("redis://u:p/w?x@h:6379"));
        assertEquals("etcd://***@h:2379", MooncakeStore.withoutPassword("etcd://t0ken@h:2379"));
    }

    @Test
    void unknownOptionsAreTyposAndNamed() {
        KVException e = invalid(BASE + "&segmnet=1GiB", Map.of());
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertTrue(e.getMessage().contains("segmnet"), e.getMessage());
    }

    @Test
    void anUnreadableOrMalformedMooncakeJsonNamesTheFileAndTheVariable() throws IOException {
        KVException missing = invalid(BASE, Map.of(MooncakeConfig.ENV_CONFIG_PATH, dir.resolve("none.json").toString()));
        assertEquals(ErrorCode.INVALID_CONFIG, missing.code());
        assertTrue(missing.getMessage().contains("none.json") && missing.getMessage().contains("MOONCAKE_CONFIG_PATH"));
        Path bad = dir.resolve("bad.json");
        Files.writeString(bad, "{not json");
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(BASE, Map.of(MooncakeConfig.ENV_CONFIG_PATH, bad.toString())).code());
        Files.writeString(bad, "[1,2]");
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(BASE, Map.of(MooncakeConfig.ENV_CONFIG_PATH, bad.toString())).code());
        Files.writeString(bad, "{\"global_segment_size\": -5}");
        assertEquals(ErrorCode.INVALID_CONFIG, invalid(BASE, Map.of(MooncakeConfig.ENV_CONFIG_PATH, bad.toString())).code());
    }
}
