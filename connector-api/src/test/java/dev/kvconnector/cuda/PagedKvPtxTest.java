package dev.kvconnector.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

class PagedKvPtxTest {
    /** The parameter types the host packs in {@link CudaPagedKernels}: 5 pointers, 2 ints, 2 longs. */
    private static final List<String> PARAM_TYPES =
            List.of("u64", "u64", "u64", "u64", "u64", "u32", "u32", "u64", "u64");

    /** The packaged PTX; fails under CI (which has nvcc) when it is missing, skips with the reason elsewhere. */
    private static PagedKvPtx packaged() {
        var found = PagedKvPtx.find();
        if (found.isEmpty()) {
            String reason = "classpath:" + PagedKvPtx.RESOURCE + " is missing: native/cuda/build-ptx.sh found no nvcc";
            if ("true".equals(System.getenv("CI"))) {
                fail(reason + " (CI=true: the CI image must have the CUDA toolkit)");
            }
            Assumptions.abort(reason);
        }
        return found.get();
    }

    @Test
    void packagedPtxDeclaresVersionTargetAndEveryEntryTheHostLaunches() {
        PagedKvPtx ptx = packaged();
        assertTrue(ptx.version().matches("\\d+\\.\\d+"), ptx.version());
        assertEquals("sm_80", ptx.target(), "one PTX for compute_80 JITs on Ampere, Ada and Hopper");
        assertTrue(ptx.entries().containsAll(PagedKvPtx.expectedEntries()),
                "missing: " + PagedKvPtx.expectedEntries().stream().filter(e -> !ptx.entries().contains(e)).toList());
        assertEquals(12, PagedKvPtx.expectedEntries().size());
        assertEquals(ptx, PagedKvPtx.require());
    }

    @Test
    void everyEntryTakesTheParametersTheHostPacks() {
        PagedKvPtx ptx = packaged();
        for (String entry : PagedKvPtx.expectedEntries()) {
            Matcher m = Pattern.compile("\\.entry\\s+" + entry + "\\s*\\(([^)]*)\\)").matcher(ptx.text());
            assertTrue(m.find(), entry);
            List<String> types = new ArrayList<>();
            Matcher p = Pattern.compile("\\.param\\s+\\.(\\w+)").matcher(m.group(1));
            while (p.find()) {
                types.add(p.group(1));
            }
            assertEquals(PARAM_TYPES, types, entry);
        }
    }

    @Test
    void parseReadsVersionTargetAndEntries() {
        String text = """
                //
                .version 8.4
                .target sm_90a, texmode_independent
                .address_size 64
                .visible .entry kvc_gather_slots_v16(
                    .param .u64 p0
                )
                .entry helper(
                )
                """;
        PagedKvPtx ptx = PagedKvPtx.parse("test", text);
        assertEquals("8.4", ptx.version());
        assertEquals("sm_90a", ptx.target());
        assertEquals(List.of("kvc_gather_slots_v16", "helper"), ptx.entries());
    }

    @Test
    void parseRejectsTextWithoutVersionOrTarget() {
        KVException e = assertThrows(KVException.class, () -> PagedKvPtx.parse("x.ptx", ".target sm_80\n"));
        assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
        assertTrue(e.getMessage().contains("x.ptx"), e.getMessage());
        assertThrows(KVException.class, () -> PagedKvPtx.parse("x.ptx", ".version 9.0\n"));
        assertThrows(KVException.class, () -> PagedKvPtx.parse("x.ptx", ""));
    }

    @Test
    void expectedEntriesCoverBothDirectionsBothIndexKindsAndThreeWidths() {
        List<String> names = PagedKvPtx.expectedEntries();
        for (String dir : List.of("gather", "scatter")) {
            for (String index : List.of("slots", "blocks")) {
                for (String v : List.of("v16", "v4", "v1")) {
                    assertTrue(names.contains("kvc_" + dir + "_" + index + "_" + v), dir + index + v);
                }
            }
        }
    }
}
