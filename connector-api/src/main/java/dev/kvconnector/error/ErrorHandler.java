package dev.kvconnector.error;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Receives failures that happen on a library's own threads (a connector's I/O threads), where no caller can catch
 * them, as Aeron's and Agrona's {@code ErrorHandler} does. The failure also reaches the caller where there is one
 * (an insert's commit, a drop-select's result); the handler is for monitoring. Called concurrently from several
 * threads: implementations are thread-safe and do not block.
 */
@FunctionalInterface
public interface ErrorHandler {
    /** Logs each failure at WARN through SLF4J, naming where it happened. */
    ErrorHandler LOGGING = new ErrorHandler() {
        private final Logger log = LoggerFactory.getLogger(ErrorHandler.class);

        @Override
        public void onError(String where, Throwable failure) {
            log.warn("{}: {}", where, failure.toString());
        }
    };

    /**
     * One failure.
     *
     * @param where what failed, for example {@code layer put to valkey://host:6379} (secrets masked)
     * @param failure the failure
     */
    void onError(String where, Throwable failure);
}
