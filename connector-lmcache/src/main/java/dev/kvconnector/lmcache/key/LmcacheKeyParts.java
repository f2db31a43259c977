package dev.kvconnector.lmcache.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * The parts that both LMCache key formats hold, {@code model@world_size@worker_id@chunk_hash} (a 2024 key puts its
 * {@code fmt@} before them, a v1 key its {@code @dtype}, layer and tags after), and the rules that keep LMCache's
 * split of a key on {@code '@'} right: neither the model id nor a chunk hash may hold the separator, and the worker
 * must lie inside the world. Every refusal is an {@code INVALID_ARGUMENT} {@link KVException} naming the part, and
 * the key when there is one.
 */
final class LmcacheKeyParts {
    private LmcacheKeyParts() {
    }

    /**
     * {@code model@world_size@worker_id@}, which the chunk hash follows in both formats.
     *
     * @throws KVException for a model id that is empty or holds {@code @}, or a worker outside the world
     */
    static String workerPrefix(String model, int worldSize, int workerId) {
        requireModel(model, null);
        requireWorker(worldSize, workerId, null);
        return model + '@' + worldSize + '@' + workerId + '@';
    }

    /**
     * Refuses a model id that is empty or holds {@code @}.
     *
     * @param key the key the model id was read from, or null when it is being built
     */
    static void requireModel(String model, String key) {
        if (model == null || model.isEmpty() || model.indexOf('@') >= 0) {
            throw invalid("model id '" + model + "' is empty or contains '@', which LMCache keys use as their field"
                    + " separator", key)
                    .hint("LMCache parses a key into its '@'-separated parts (exactly 5 in a 2024 key, 5 or more in a"
                            + " v1 key); serve the model under a name without '@'")
                    .build();
        }
    }

    /**
     * Refuses a world size below 1 or a worker id outside {@code 0..worldSize-1}.
     *
     * @param key the key the numbers were read from, or null when it is being built
     */
    static void requireWorker(int worldSize, int workerId, String key) {
        if (worldSize < 1 || workerId < 0 || workerId >= worldSize) {
            throw invalid("worker " + workerId + " of world size " + worldSize
                    + " is out of range (need 0 <= worker id < world size)", key).build();
        }
    }

    /**
     * Refuses an engine's hash of chunk {@code chunk} (LMCache uses it unchanged as the key's {@code chunk_hash}) that
     * is null, empty or holds {@code @}.
     */
    static void requireEngineHash(int chunk, String hash) {
        if (hash == null || hash.isEmpty() || hash.indexOf('@') >= 0) {
            throw invalid("engine chunk hash " + chunk + " is "
                    + (hash == null ? "null" : hash.isEmpty() ? "empty" : "'" + hash + "', which contains '@'"), null)
                    .operation("plan")
                    .hint("LMCache keys need a non-empty chunk hash without '@' for every chunk")
                    .build();
        }
    }

    /** An {@code INVALID_ARGUMENT} error about an LMCache key part, naming {@code key} when it is not null. */
    static KVException.Builder invalid(String detail, String key) {
        KVException.Builder b = KVException.of(ErrorCode.INVALID_ARGUMENT, detail);
        if (key != null) {
            b.key(key);
        }
        return b;
    }
}
