package dev.kvconnector.memory;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The native fused copy ({@code native/kvc-copy}): copies a range and returns its {@link WordSum} contribution in one
 * pass over the source, with non-temporal stores into the destination, on x86-64 CPUs with AVX2.
 *
 * <p>Why a native library in a pure-Java module: the JDK streams a copy into memory with non-temporal stores only
 * from 2.5 MiB up, and Java has no such store of its own. A layer moves in blocks of tens of KiB, so its copies take
 * the ordinary path, which reads every destination line before it writes it: measured on the project's machines, a
 * 128 MiB request copied in pieces of up to 2 MiB costs 1.35x the same bytes in one copy, and 1.5x with the sum
 * added from cache, where this loop costs 1.07x ({@code benchmarks/results/REPORT.md}, "Connector core").
 *
 * <p>The library travels in connector-api's jar ({@code dev/kvconnector/memory/linux-<arch>/libkvc_copy.so}, built by
 * the native module when cmake and a C compiler exist). On first use it is copied to a private temporary file,
 * loaded into the global arena and the file removed. {@link #available()} is false, and {@link #status()} says why,
 * when the jar has no library for this platform, the CPU lacks AVX2, native access is refused, or
 * {@value #ENABLED_PROP_NAME}{@code =false}; {@link ChecksummedCopy} then copies in Java, with the same bytes and the
 * same sum. Which copy is in use is logged once at INFO when this class loads.
 */
public final class NativeCopy {
    /** System property that turns the native copy off ({@code false}); read once, when the class loads. */
    public static final String ENABLED_PROP_NAME = "kvc.copy.native";
    /** The native copy is used wherever it loads. */
    public static final boolean ENABLED_DEFAULT = true;
    /** Copies below this many bytes stay in Java, where a downcall would cost more than streaming saves. */
    public static final long MIN_BYTES = 4096;

    private static final Logger LOG = LoggerFactory.getLogger(NativeCopy.class);
    private static final int ABI = 1;
    private static final String LIBRARY = "libkvc_copy.so";
    private static final MethodHandle COPY_SUM;
    private static final String STATUS;

    static {
        MethodHandle copySum = null;
        String status;
        try {
            if (!Boolean.parseBoolean(System.getProperty(ENABLED_PROP_NAME, Boolean.toString(ENABLED_DEFAULT)))) {
                status = "Java copy: the native copy is switched off (" + ENABLED_PROP_NAME + "=false)";
            } else {
                SymbolLookup lookup = load();
                if (lookup == null) {
                    status = "Java copy: connector-api's jar has no " + LIBRARY + " for " + platform()
                            + " (it is built with the native module where cmake and a C compiler exist)";
                } else if ((int) bind(lookup, "kvc_copy_abi", FunctionDescriptor.of(ValueLayout.JAVA_INT)).invokeExact()
                        != ABI) {
                    status = "Java copy: " + LIBRARY + " has another ABI than this connector-api; rebuild both";
                } else if ((int) bind(lookup, "kvc_copy_streaming", FunctionDescriptor.of(ValueLayout.JAVA_INT))
                        .invokeExact() != 1) {
                    status = "Java copy: this CPU has no AVX2, so the native copy would not be faster";
                } else {
                    copySum = bind(lookup, "kvc_copy_sum", FunctionDescriptor.of(ValueLayout.JAVA_LONG,
                            ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                            ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
                    status = "native copy: " + LIBRARY + " (AVX2, non-temporal stores, word sum fused)";
                }
            }
        } catch (IllegalCallerException e) {
            status = "Java copy: native access is not enabled (run the JVM with --enable-native-access=ALL-UNNAMED)";
        } catch (Throwable t) {
            status = "Java copy: " + LIBRARY + " did not load: " + t;
        }
        COPY_SUM = copySum;
        STATUS = status;
        LOG.info("kvconnector payload copies: {}", status);
    }

    private NativeCopy() {
    }

    /** Whether {@link ChecksummedCopy} copies through the native library. */
    public static boolean available() {
        return COPY_SUM != null;
    }

    /** Which copy {@link ChecksummedCopy} uses, and why not the native one when it does not. */
    public static String status() {
        return STATUS;
    }

    /**
     * Copies {@code bytes} bytes (native segments, not overlapping, ranges already checked) and returns their word sum
     * from payload position {@code position}: the even words' sum modulo 2^32 in the low half, the odd words' in the
     * high half. Only when {@link #available()}.
     */
    static long copySum(MemorySegment src, long srcOffset, MemorySegment dst, long dstOffset, long bytes,
                        long position) {
        try {
            return (long) COPY_SUM.invokeExact(src, srcOffset, dst, dstOffset, bytes, position);
        } catch (Throwable t) {
            throw new IllegalStateException("kvc_copy_sum failed: " + t, t);
        }
    }

    private static String platform() {
        return "linux-" + System.getProperty("os.arch", "?").toLowerCase(Locale.ROOT);
    }

    @SuppressWarnings("restricted")
    private static SymbolLookup load() throws IOException {
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux")) {
            return null;
        }
        try (InputStream in = NativeCopy.class.getResourceAsStream(platform() + "/" + LIBRARY)) {
            if (in == null) {
                return null;
            }
            Path file = Files.createTempFile("kvc_copy-", ".so");
            try {
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                return SymbolLookup.libraryLookup(file, Arena.global());
            } finally {
                Files.deleteIfExists(file);
            }
        }
    }

    @SuppressWarnings("restricted")
    private static MethodHandle bind(SymbolLookup lookup, String name, FunctionDescriptor descriptor) {
        MemorySegment symbol = lookup.find(name).orElseThrow(() -> new UnsatisfiedLinkError(LIBRARY + " has no " + name));
        return Linker.nativeLinker().downcallHandle(symbol, descriptor, Linker.Option.critical(false));
    }
}
