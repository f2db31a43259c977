package dev.kvconnector.valkey.testing;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * A throwaway certificate authority, made with {@code openssl} for one test class: a CA, a server certificate for
 * 127.0.0.1 and localhost, a client certificate in a PKCS12 file, and a second, untrusted CA.
 *
 * @param dir where the files are
 * @param caPem the CA certificate (PEM)
 * @param serverCert the server certificate (PEM), signed by the CA
 * @param serverKey the server's private key (PEM)
 * @param clientP12 the client certificate and key (PKCS12, password {@link #P12_PASSWORD})
 * @param otherCaPem a CA that signed nothing here
 */
public record TestCertificates(Path dir, Path caPem, Path serverCert, Path serverKey, Path clientP12,
                               Path otherCaPem) {
    /** The password of the client PKCS12 file. */
    public static final String P12_PASSWORD = "p12-Pa55";

    /** Generates the files in a fresh temporary directory. */
    public static TestCertificates generate() {
        try {
            Path d = Files.createTempDirectory("kvc-tls-");
            Path ext = d.resolve("san.ext");
            Files.writeString(ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
            openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                    "-days", "2", "-subj", "/CN=kvc-test-ca");
            openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out",
                    "other.pem", "-days", "2", "-subj", "/CN=kvc-other-ca");
            for (String who : new String[] {"server", "client"}) {
                openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", who + ".key", "-out", who + ".csr",
                        "-subj", "/CN=" + (who.equals("server") ? "127.0.0.1" : "kvc-client"));
                openssl(d, "x509", "-req", "-in", who + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                        "-CAcreateserial", "-out", who + ".pem", "-days", "2", "-extfile", ext.toString());
            }
            openssl(d, "pkcs12", "-export", "-in", "client.pem", "-inkey", "client.key", "-out", "client.p12",
                    "-passout", "pass:" + P12_PASSWORD);
            return new TestCertificates(d, d.resolve("ca.pem"), d.resolve("server.pem"), d.resolve("server.key"),
                    d.resolve("client.p12"), d.resolve("other.pem"));
        } catch (IOException e) {
            String reason = "openssl is needed for the TLS tests (apt-get install -y openssl): " + e.getMessage();
            if ("true".equalsIgnoreCase(System.getenv("CI"))) {
                fail(reason);
            }
            Assumptions.abort(reason);
            throw new AssertionError("unreachable");
        }
    }

    /** The server arguments for a TLS port; {@code authClients} requires client certificates. */
    public List<String> serverArgs(int tlsPort, boolean authClients) {
        return List.of("--tls-port", Integer.toString(tlsPort), "--tls-cert-file", serverCert.toString(),
                "--tls-key-file", serverKey.toString(), "--tls-ca-cert-file", caPem.toString(),
                "--tls-auth-clients", authClients ? "yes" : "no");
    }

    private static void openssl(Path dir, String... args) throws IOException {
        List<String> cmd = new java.util.ArrayList<>();
        cmd.add("openssl");
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true)
                .redirectOutput(dir.resolve("openssl.log").toFile()).start();
        try {
            if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
                p.destroyForcibly();
                throw new IOException("openssl " + String.join(" ", args) + " failed: "
                        + Files.readString(dir.resolve("openssl.log")));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        }
    }

    /** Deletes the files. */
    public void delete() {
        try (var files = Files.walk(dir)) {
            files.sorted((a, b) -> b.compareTo(a)).forEach(f -> f.toFile().delete());
        } catch (IOException ignored) {
            // A leftover temp directory is harmless.
        }
    }
}
