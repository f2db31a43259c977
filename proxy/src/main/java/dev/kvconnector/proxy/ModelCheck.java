package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;

import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Asks an instance's {@code GET /v1/models} whether it serves the proxy's model. */
final class ModelCheck {
    private ModelCheck() {
    }

    /** Returns null when {@code instance} serves {@code model}, otherwise why not, naming host and port. */
    static String verify(HttpClient client, HostPort instance, String model, Duration timeout)
            throws InterruptedException {
        HttpRequest req = HttpRequest.newBuilder(instance.baseUri().resolve("/v1/models")).timeout(timeout).GET()
                .build();
        HttpResponse<byte[]> res;
        try {
            res = client.send(req, HttpResponse.BodyHandlers.ofByteArray());
        } catch (java.io.IOException e) {
            return "GET http://" + instance + "/v1/models failed (" + e.getClass().getSimpleName()
                    + (e.getMessage() == null ? "" : ": " + e.getMessage())
                    + "): is the instance up, and the host and port right?";
        }
        if (res.statusCode() != 200) {
            return "GET http://" + instance + "/v1/models answered " + res.statusCode();
        }
        List<String> served = new ArrayList<>();
        try {
            JsonNode data = HttpIo.JSON.readTree(res.body()).path("data");
            for (JsonNode m : data) {
                String id = m.path("id").asText(null);
                if (model.equals(id)) {
                    return null;
                }
                served.add(id);
            }
        } catch (java.io.IOException e) {
            return "GET http://" + instance + "/v1/models did not answer JSON: is this an OpenAI-compatible server?";
        }
        return instance + " serves " + served + ", not '" + model
                + "': every instance must serve the same model (check --served-model-name)";
    }
}
