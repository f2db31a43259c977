package dev.kvconnector.demo.launcher;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/**
 * Sends every prompt as a streamed {@code POST /v1/completions} from a few concurrent clients and times each
 * answer from the client's side: time to first token (the first SSE chunk) and total time, in ms. Two workloads:
 * a list of independent text prompts ({@link #run}), or conversations ({@link #runConversations}), whose each turn
 * is sent once the previous turn's answer is in, as token ids: that turn's prompt, its answer, and new text.
 */
final class LoadRunner {
    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * One request's outcome; times in ms from the start of the run.
     *
     * @param index the prompt's index (in a conversation workload, {@code conversation * turns + turn})
     * @param promptTokens prompt length in tokens (= bytes of a text prompt)
     * @param startMs when it was sent
     * @param firstTokenMs when the first chunk arrived (-1 if none)
     * @param endMs when the answer ended
     * @param text the generated text
     * @param tokenIds the generated token ids, from the last chunk's {@code token_ids} (empty if absent)
     * @param error null, or why the request failed
     */
    record Result(int index, int promptTokens, double startMs, double firstTokenMs, double endMs, String text,
            List<Integer> tokenIds, String error) {
        double ttftMs() {
            return firstTokenMs - startMs;
        }
    }

    private LoadRunner() {
    }

    /**
     * Runs all prompts against {@code base} and returns the results in prompt order.
     *
     * @param label shown with the progress bar
     * @param progress where the progress bar goes (stderr), or null for none
     */
    static List<Result> run(String label, URI base, String model, List<String> prompts, int maxTokens, int clients,
            PrintStream progress) throws InterruptedException {
        URI endpoint = base.resolve("/v1/completions");
        long t0 = System.nanoTime();
        AtomicInteger done = new AtomicInteger();
        Result[] results = new Result[prompts.size()];
        AtomicInteger next = new AtomicInteger();
        onClients(clients, http -> {
            for (int i = next.getAndIncrement(); i < prompts.size(); i = next.getAndIncrement()) {
                results[i] = one(http, endpoint, model, i, JSON.getNodeFactory().textNode(prompts.get(i)),
                        prompts.get(i).length(), maxTokens, t0);
                bar(progress, label, done.incrementAndGet(), prompts.size());
            }
        });
        if (progress != null) {
            progress.println();
        }
        return List.of(results);
    }

    /**
     * Runs {@code conversations} against {@code base}: every conversation's first turn is ready at the start (one
     * that repeats another's opening once that one's first turn is answered), a turn's successor once it is
     * answered; each free client takes a ready turn at random (seeded by {@code seed}, so no fixed rotation lines
     * a conversation's turns up with the proxy's round robin). A conversation whose turn failed stops; its later
     * turns are results with an error. Results in {@code conversation * turns + turn} order.
     */
    static List<Result> runConversations(String label, URI base, String model, List<Conversations.Conversation>
            conversations, int maxTokens, int clients, long seed, PrintStream progress) throws InterruptedException {
        URI endpoint = base.resolve("/v1/completions");
        long t0 = System.nanoTime();
        int turns = conversations.getFirst().followUps().size() + 1;
        int total = conversations.size() * turns;
        Result[] results = new Result[total];
        TurnQueue queue = new TurnQueue(conversations, turns, seed);
        AtomicInteger done = new AtomicInteger();
        onClients(clients, http -> {
            for (TurnQueue.Turn t = queue.take(); t != null; t = queue.take()) {
                int index = t.conversation() * turns + t.turn();
                ArrayNode prompt = JSON.createArrayNode();
                for (int id : t.prompt()) {
                    prompt.add(id);
                }
                Result r = one(http, endpoint, model, index, prompt, t.prompt().length, maxTokens, t0);
                results[index] = r;
                int failedLater = queue.answered(t, r.error() == null ? r.tokenIds() : null);
                for (int k = 1; k <= failedLater; k++) {
                    results[index + k] = new Result(index + k, 0, r.endMs(), -1, r.endMs(), "", List.of(),
                            "not sent: turn " + t.turn() + " of conversation " + t.conversation() + " failed");
                }
                bar(progress, label, done.addAndGet(1 + failedLater), total);
            }
        });
        if (progress != null) {
            progress.println();
        }
        return List.of(results);
    }

    /** What one client thread does with the HTTP client all of them share. */
    @FunctionalInterface
    private interface Client {
        void run(HttpClient http) throws InterruptedException;
    }

    /** Runs {@code client} on {@code clients} threads at once and waits for every one. */
    private static void onClients(int clients, Client client) throws InterruptedException {
        try (HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5))
                     .version(HttpClient.Version.HTTP_1_1).build();
             ExecutorService pool = Executors.newFixedThreadPool(clients)) {
            List<Future<?>> workers = new ArrayList<>();
            for (int c = 0; c < clients; c++) {
                workers.add(pool.submit(() -> {
                    client.run(http);
                    return null;
                }));
            }
            for (Future<?> w : workers) {
                try {
                    w.get();
                } catch (ExecutionException e) {
                    throw new IllegalStateException("a client thread failed", e.getCause());
                }
            }
        }
    }

    private static Result one(HttpClient http, URI endpoint, String model, int index, JsonNode prompt,
            int promptTokens, int maxTokens, long t0) {
        ObjectNode body = JSON.createObjectNode().put("model", model).put("max_tokens", maxTokens).put("stream", true);
        body.set("prompt", prompt);
        HttpRequest req = HttpRequest.newBuilder(endpoint).timeout(Duration.ofMinutes(5))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body.toString())).build();
        double start = ms(t0);
        double first = -1;
        StringBuilder text = new StringBuilder();
        List<Integer> ids = new ArrayList<>();
        try {
            HttpResponse<Stream<String>> r = http.send(req, HttpResponse.BodyHandlers.ofLines());
            if (r.statusCode() != 200) {
                String detail = String.join(" ", r.body().toList());
                return new Result(index, promptTokens, start, first, ms(t0), "", ids, "HTTP " + r.statusCode() + ": " + detail);
            }
            boolean finished = false;
            for (Iterator<String> it = r.body().iterator(); it.hasNext(); ) {
                String line = it.next();
                if (!line.startsWith("data: ")) {
                    continue;
                }
                if (first < 0) {
                    first = ms(t0);
                }
                String data = line.substring(6);
                if (data.equals("[DONE]")) {
                    finished = true;
                    break;
                }
                JsonNode chunk = JSON.readTree(data);
                if (chunk.has("error")) {
                    return new Result(index, promptTokens, start, first, ms(t0), text.toString(), ids,
                            "stream error: " + chunk.get("error"));
                }
                JsonNode choice = chunk.path("choices").path(0);
                text.append(choice.path("text").asText(""));
                choice.path("token_ids").forEach(t -> ids.add(t.asInt()));
            }
            return new Result(index, promptTokens, start, first, ms(t0), text.toString(), ids,
                    finished ? null : "the stream ended without [DONE]");
        } catch (IOException e) {
            return new Result(index, promptTokens, start, first, ms(t0), text.toString(), ids, e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Result(index, promptTokens, start, first, ms(t0), text.toString(), ids, "interrupted");
        }
    }

    private static double ms(long t0) {
        return (System.nanoTime() - t0) / 1e6;
    }

    private static synchronized void bar(PrintStream out, String label, int done, int total) {
        if (out == null) {
            return;
        }
        int width = 30;
        int filled = done * width / total;
        out.print("\r" + label + " [" + "#".repeat(filled) + " ".repeat(width - filled) + "] " + done + "/" + total);
        out.flush();
    }
}
