package dev.kvconnector.valkey;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Collection;
import java.util.Set;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;

/**
 * Builds the {@link SSLContext} of a {@code valkeys://} or {@code rediss://} store from its URI options:
 * <ul>
 *   <li>{@code tls-ca}: a PEM file of CA certificates to trust (instead of the JVM's default trust store);</li>
 *   <li>{@code truststore} and {@code truststore-password}: a PKCS12 or JKS trust store, the alternative;</li>
 *   <li>{@code keystore} and {@code keystore-password}: a PKCS12 or JKS key store holding the client certificate,
 *       for servers that set {@code tls-auth-clients yes};</li>
 *   <li>{@code verify-hostname}: whether the certificate must name the host of the URI (default true).</li>
 * </ul>
 */
final class TlsContexts {
    /** The TLS options, on top of the store's plain options. */
    static final Set<String> OPTIONS = Set.of("tls-ca", "truststore", "truststore-password", "keystore",
            "keystore-password", "verify-hostname");

    private TlsContexts() {
    }

    static SSLContext fromUri(StoreUri uri) {
        String ca = uri.param("tls-ca");
        String trustStore = uri.param("truststore");
        if (ca != null && trustStore != null) {
            throw KVException.of(ErrorCode.INVALID_URI, "give tls-ca or truststore, not both")
                    .store(uri.masked()).operation("open").build();
        }
        String file = null;
        try {
            TrustManager[] trust = null;
            if (ca != null) {
                file = ca;
                trust = trustManagers(pemTrustStore(Path.of(ca)));
            } else if (trustStore != null) {
                file = trustStore;
                trust = trustManagers(KeyStore.getInstance(new File(trustStore), password(uri,
                        "truststore-password")));
            }
            KeyManager[] keys = null;
            String keyStore = uri.param("keystore");
            if (keyStore != null) {
                file = keyStore;
                char[] pw = password(uri, "keystore-password");
                KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
                kmf.init(KeyStore.getInstance(new File(keyStore), pw), pw);
                keys = kmf.getKeyManagers();
            }
            file = null;
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(keys, trust, null);
            return ctx;
        } catch (IOException | GeneralSecurityException e) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, "cannot set up TLS" + (file == null ? "" : " from "
                            + file) + ": " + e.getMessage())
                    .store(uri.masked()).operation("open").cause(e)
                    .hint("tls-ca takes a PEM file of certificates; truststore and keystore take PKCS12 or JKS files "
                            + "with their -password options")
                    .build();
        }
    }

    private static KeyStore pemTrustStore(Path pem) throws IOException, GeneralSecurityException {
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        Collection<? extends Certificate> certs;
        try (InputStream in = Files.newInputStream(pem)) {
            certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
        }
        if (certs.isEmpty()) {
            throw new GeneralSecurityException("no certificate in the file");
        }
        int i = 0;
        for (Certificate c : certs) {
            ks.setCertificateEntry("ca-" + i++, c);
        }
        return ks;
    }

    private static TrustManager[] trustManagers(KeyStore ks) throws GeneralSecurityException {
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        return tmf.getTrustManagers();
    }

    private static char[] password(StoreUri uri, String name) {
        String p = uri.param(name);
        return p == null ? null : p.toCharArray();
    }
}
