package dev.kvconnector.valkey;

/** The store's semantics over RESP2. */
class ValkeyStoreResp2Test extends AbstractValkeyStoreTest {
    @Override
    String protocol() {
        return "2";
    }
}
