package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectMethod;

import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.BrokenConnector.Breakage;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * Each case of {@link KVStoreConnectorContract} fails when the behaviour it names breaks: it runs (in a nested JUnit
 * launch) over a StoreConnector on {@code memory:} as it is, where it must pass, then over the same connector in a
 * {@link BrokenConnector} that breaks that one promise, where it must fail.
 */
class KVStoreConnectorContractCatchesBreakageTest {
    @ParameterizedTest
    @EnumSource(value = Breakage.class, names = "NONE", mode = EnumSource.Mode.EXCLUDE)
    void theCaseNamedForABehaviourFailsWhenTheBehaviourBreaks(Breakage breakage) {
        TestExecutionSummary intact = run(breakage.caseThatCatchesIt, Breakage.NONE);
        assertEquals(1, intact.getTestsSucceededCount(), () -> "over the intact connector: " + failures(intact));
        TestExecutionSummary broken = run(breakage.caseThatCatchesIt, breakage);
        assertEquals(1, broken.getTestsFailedCount(), breakage + " went unnoticed by " + breakage.caseThatCatchesIt);
        assertTrue(broken.getFailures().getFirst().getException() instanceof AssertionError,
                () -> "failed by an assertion, not an error: " + failures(broken));
    }

    private static TestExecutionSummary run(String caseName, Breakage breakage) {
        OverMemory.breakage = breakage;
        SummaryGeneratingListener listener = new SummaryGeneratingListener();
        LauncherFactory.create().execute(LauncherDiscoveryRequestBuilder.request()
                .selectors(selectMethod(OverMemory.class, caseName)).build(), listener);
        TestExecutionSummary summary = listener.getSummary();
        assertEquals(1, summary.getTestsFoundCount(), "the contract has no case " + caseName);
        return summary;
    }

    private static List<String> failures(TestExecutionSummary summary) {
        return summary.getFailures().stream().map(f -> String.valueOf(f.getException())).toList();
    }

    /** The contract over a StoreConnector on memory:, broken as {@link #breakage} says. Launched by the test above. */
    static class OverMemory extends KVStoreConnectorContract {
        static volatile Breakage breakage = Breakage.NONE;
        private KVStore store;

        @Override
        protected Pair open(KVLayout layout, PagedKVCache destination, long layerTimeoutMillis) {
            store = KVStores.open("memory:?capacity=64MiB");
            KVStoreConnector intact = KVStoreConnector.builder(store, layout).chunkTokens(32)
                    .checksums(breakage != Breakage.NO_CHECKSUMS).layerTimeoutMillis(layerTimeoutMillis).build();
            return Pair.of(new BrokenConnector(intact, breakage)).closing(() -> {
                intact.close();
                store.close();
            });
        }

        @Override
        protected boolean keepsCommittedEntries() {
            return true;
        }

        @Override
        protected void corruptLayer(Pair pair, RequestTokens request, BlockTable destinationBlocks, int layer) {
            corruptStoredLayer(store, pair.consumer(), request, layer);
        }
    }
}
