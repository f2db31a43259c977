package dev.kvconnector.architecture;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

/**
 * The layering rules of ARCHITECTURE.md, checked over every module on kvctl's class path (kvctl depends on every
 * backend): connector-api depends on no backend, backends do not depend on each other, and the byte-object
 * backends know nothing of tensors or the connector.
 */
@AnalyzeClasses(packages = "dev.kvconnector", importOptions = ImportOption.DoNotIncludeTests.class)
class LayeringTest {
    private static final String[] API = {"dev.kvconnector.tensor..", "dev.kvconnector.layout..",
        "dev.kvconnector.paged..", "dev.kvconnector.memory..", "dev.kvconnector.key..", "dev.kvconnector.codec..",
        "dev.kvconnector.store..", "dev.kvconnector.connector..", "dev.kvconnector.config..",
        "dev.kvconnector.error..", "dev.kvconnector.workload..", "dev.kvconnector.cuda.."};
    private static final String[] BACKENDS_AND_TOOLS = {"dev.kvconnector.valkey..", "dev.kvconnector.mooncake..",
        "dev.kvconnector.lmcache..", "dev.kvconnector.proxy..", "dev.kvconnector.demo..", "dev.kvconnector.kvctl.."};

    @ArchTest
    static final ArchRule connectorApiDependsOnNoBackend = noClasses().that().resideInAnyPackage(API)
            .should().dependOnClassesThat().resideInAnyPackage(BACKENDS_AND_TOOLS)
            .allowEmptyShould(true);

    @ArchTest
    static final ArchRule backendsDoNotDependOnEachOther = slices()
            .matching("dev.kvconnector.(valkey|mooncake|lmcache)..")
            .should().notDependOnEachOther()
            .allowEmptyShould(true);

    @ArchTest
    static final ArchRule byteStoresKnowNothingOfTensorsOrTheConnector = noClasses()
            .that().resideInAnyPackage("dev.kvconnector.valkey..", "dev.kvconnector.mooncake..")
            .should().dependOnClassesThat().resideInAnyPackage("dev.kvconnector.connector..", "dev.kvconnector.paged..",
                    "dev.kvconnector.tensor..")
            .allowEmptyShould(true);
}
