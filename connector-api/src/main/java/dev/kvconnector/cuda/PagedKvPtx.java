package dev.kvconnector.cuda;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The PTX of {@code native/cuda/paged_kv.cu} and what it declares. The text is read from {@code -Dkvc.cuda.ptx} or
 * {@code KVC_CUDA_PTX} when set (a file, for trying a rebuilt kernel without rebuilding the jar), else from the
 * class path resource {@value #RESOURCE}, which the build packages when it found {@code nvcc}.
 *
 * @param source where the text came from: a file path or {@code classpath:...}
 * @param text the PTX
 * @param version the {@code .version} directive (PTX ISA), for example {@code 9.0}
 * @param target the {@code .target} directive, for example {@code sm_80}
 * @param entries the names of the {@code .entry} kernels, in file order
 */
public record PagedKvPtx(String source, String text, String version, String target, List<String> entries) {
    /** The class path resource the build packages. */
    public static final String RESOURCE = "/dev/kvconnector/cuda/paged_kv.ptx";
    /** System property naming a PTX file to use instead of the resource. */
    public static final String PTX_PROP = "kvc.cuda.ptx";
    /** Environment variable naming a PTX file, when the property is unset. */
    public static final String PTX_ENV = "KVC_CUDA_PTX";

    private static final Pattern VERSION = Pattern.compile("(?m)^\\s*\\.version\\s+(\\S+)");
    private static final Pattern TARGET = Pattern.compile("(?m)^\\s*\\.target\\s+([^\\s,]+)");
    private static final Pattern ENTRY = Pattern.compile("(?m)^\\s*(?:\\.visible\\s+|\\.weak\\s+)?\\.entry\\s+(\\w+)");

    /** Copies the list. */
    public PagedKvPtx {
        entries = List.copyOf(entries);
    }

    /** The kernel entries {@link CudaPagedKernels} launches: every direction, index kind and vector width. */
    public static List<String> expectedEntries() {
        List<String> names = new ArrayList<>();
        for (PagedKernelGeometry.Direction d : PagedKernelGeometry.Direction.values()) {
            for (PagedKernelGeometry.Index i : PagedKernelGeometry.Index.values()) {
                for (int v : new int[] {16, 4, 1}) {
                    names.add(PagedKernelGeometry.plan(d, i, 1, v, 1).entry());
                }
            }
        }
        return List.copyOf(names);
    }

    /**
     * Parses PTX text.
     *
     * @throws KVException {@link ErrorCode#CORRUPT_OBJECT} when {@code .version} or {@code .target} is missing
     */
    public static PagedKvPtx parse(String source, String text) {
        Matcher v = VERSION.matcher(text);
        Matcher t = TARGET.matcher(text);
        if (!v.find() || !t.find()) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, source + " is not PTX: no .version or .target directive")
                    .hint("rebuild it with native/cuda/build-ptx.sh").build();
        }
        List<String> entries = new ArrayList<>();
        Matcher e = ENTRY.matcher(text);
        while (e.find()) {
            entries.add(e.group(1));
        }
        return new PagedKvPtx(source, text, v.group(1), t.group(1), entries);
    }

    /**
     * Finds and parses the PTX, or returns empty when neither the property, the environment variable nor the
     * resource names one.
     *
     * @throws KVException {@link ErrorCode#IO_ERROR} when a configured file cannot be read
     */
    public static Optional<PagedKvPtx> find() {
        String configured = Optional.ofNullable(System.getProperty(PTX_PROP)).orElse(System.getenv(PTX_ENV));
        if (configured != null && !configured.isBlank()) {
            try {
                return Optional.of(parse(configured, Files.readString(Path.of(configured), StandardCharsets.UTF_8)));
            } catch (IOException e) {
                throw KVException.of(ErrorCode.IO_ERROR, "cannot read the PTX file " + configured + ": " + e)
                        .hint("check " + PTX_PROP + " / " + PTX_ENV).cause(e).build();
            }
        }
        try (InputStream in = PagedKvPtx.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                return Optional.empty();
            }
            return Optional.of(parse("classpath:" + RESOURCE, new String(in.readAllBytes(), StandardCharsets.UTF_8)));
        } catch (IOException e) {
            throw KVException.of(ErrorCode.IO_ERROR, "cannot read classpath:" + RESOURCE + ": " + e).cause(e).build();
        }
    }

    /**
     * {@link #find()}, failing when there is none or when an expected entry is missing.
     *
     * @throws KVException {@link ErrorCode#UNSUPPORTED} naming where it looked
     */
    public static PagedKvPtx require() {
        PagedKvPtx ptx = find().orElseThrow(() -> KVException.of(ErrorCode.UNSUPPORTED, "no paged-KV kernels: "
                        + PTX_PROP + " and " + PTX_ENV + " are unset and classpath:" + RESOURCE + " is missing")
                .hint("this build of connector-api was made without nvcc; rebuild with the CUDA toolkit installed,"
                        + " or point -D" + PTX_PROP + " at a paged_kv.ptx from native/cuda/build-ptx.sh").build());
        List<String> missing = new ArrayList<>(expectedEntries());
        missing.removeAll(ptx.entries());
        if (!missing.isEmpty()) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, ptx.source() + " lacks the kernel entries " + missing)
                    .hint("it is stale or from another source: rebuild it with native/cuda/build-ptx.sh").build();
        }
        return ptx;
    }
}
