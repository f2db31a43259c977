package dev.kvconnector.architecture;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.core.importer.Location;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

/**
 * The layering rules of ARCHITECTURE.md, checked over every module on kvctl's class path (kvctl depends on every
 * backend): connector-api depends on no backend, backends do not depend on each other, and the byte-object
 * backends know nothing of tensors or the connector; the connector and its codecs import nothing of cuda/ and
 * name no concrete store, and no byte store (memory:, shm:, valkey, mooncake, the LMCache client and server)
 * imports tensors, layouts, paged caches, codecs or the connector. In connector-mooncake the store
 * ({@code dev.kvconnector.mooncake}) and the transfer-engine bindings ({@code mooncake.te}) are byte movers; its
 * {@code mooncake.p2p} is a connector (the peer-to-peer {@code KVStoreConnector}), held to the connector's rules,
 * as LMCache's {@code lmcache.connector} is. No rule allows an empty match: a renamed package fails the rule that
 * names it instead of passing silently.
 */
@AnalyzeClasses(packages = "dev.kvconnector",
        importOptions = {ImportOption.DoNotIncludeTests.class, LayeringTest.DoNotIncludeTestJars.class})
class LayeringTest {
    /** Leaves out the other modules' test-jars (contract suites, test doubles) that kvctl's tests have on the path. */
    static final class DoNotIncludeTestJars implements ImportOption {
        @Override
        public boolean includes(Location location) {
            return !location.contains("-tests.jar");
        }
    }

    private static final String[] API = {"dev.kvconnector.tensor..", "dev.kvconnector.layout..",
        "dev.kvconnector.paged..", "dev.kvconnector.memory..", "dev.kvconnector.key..", "dev.kvconnector.codec..",
        "dev.kvconnector.store..", "dev.kvconnector.connector..", "dev.kvconnector.config..",
        "dev.kvconnector.error..", "dev.kvconnector.workload..", "dev.kvconnector.cuda..", "dev.kvconnector.events.."};
    private static final String[] BACKENDS_AND_TOOLS = {"dev.kvconnector.valkey..", "dev.kvconnector.mooncake..",
        "dev.kvconnector.lmcache..", "dev.kvconnector.proxy..", "dev.kvconnector.demo..", "dev.kvconnector.kvctl.."};

    @ArchTest
    static final ArchRule connectorApiDependsOnNoBackend = noClasses().that().resideInAnyPackage(API)
            .should().dependOnClassesThat().resideInAnyPackage(BACKENDS_AND_TOOLS);

    @ArchTest
    static final ArchRule backendsDoNotDependOnEachOther = slices()
            .matching("dev.kvconnector.(valkey|mooncake|lmcache)..")
            .should().notDependOnEachOther();

    @ArchTest
    static final ArchRule byteStoresKnowNothingOfTensorsOrTheConnector = noClasses()
            .that().resideInAnyPackage("dev.kvconnector.valkey..", "dev.kvconnector.mooncake",
                    "dev.kvconnector.mooncake.te..")
            .should().dependOnClassesThat().resideInAnyPackage("dev.kvconnector.connector..", "dev.kvconnector.paged..",
                    "dev.kvconnector.tensor..");

    @ArchTest
    static final ArchRule connectorImportsNothingOfCuda = noClasses()
            .that().resideInAnyPackage("dev.kvconnector.connector..", "dev.kvconnector.codec..")
            .should().dependOnClassesThat().resideInAnyPackage("dev.kvconnector.cuda..");

    @ArchTest
    static final ArchRule connectorNamesNoConcreteStore = noClasses()
            .that().resideInAnyPackage("dev.kvconnector.connector..", "dev.kvconnector.codec..",
                    "dev.kvconnector.lmcache.connector..", "dev.kvconnector.lmcache.format..",
                    "dev.kvconnector.mooncake.p2p..")
            .should().dependOnClassesThat().resideInAnyPackage("dev.kvconnector.store.memory..",
                    "dev.kvconnector.store.shm..", "dev.kvconnector.store.tiered..", "dev.kvconnector.valkey..",
                    "dev.kvconnector.lmcache.client..", "dev.kvconnector.lmcache.store..", "dev.kvconnector.mooncake");

    @ArchTest
    static final ArchRule everyByteStoreKnowsNothingOfTensors = noClasses()
            .that().resideInAnyPackage("dev.kvconnector.store..", "dev.kvconnector.valkey..",
                    "dev.kvconnector.mooncake", "dev.kvconnector.mooncake.te..", "dev.kvconnector.lmcache.client..", "dev.kvconnector.lmcache.server..",
                    "dev.kvconnector.lmcache.protocol..")
            .should().dependOnClassesThat().resideInAnyPackage("dev.kvconnector.tensor..", "dev.kvconnector.paged..",
                    "dev.kvconnector.connector..", "dev.kvconnector.codec..", "dev.kvconnector.layout..");
}
