package dev.kvconnector.valkey;

/** The store's semantics over RESP3 ({@code HELLO 3}). */
class ValkeyStoreResp3Test extends AbstractValkeyStoreTest {
    @Override
    String protocol() {
        return "3";
    }
}
