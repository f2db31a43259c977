package dev.kvconnector.cuda;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Runs a test class only where {@link CudaRuntime#probe()} finds a usable GPU, and skips it elsewhere with the
 * reason "no CUDA device: ..." and the probe's explanation. With {@code -Dkvc.cuda.require=true} (as
 * {@code native/cuda/device-check.sh} sets) the tests run regardless, so a broken driver fails them instead of
 * skipping them silently.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@ExtendWith(RequiresCudaDevice.Condition.class)
@interface RequiresCudaDevice {
    /** System property that makes missing GPUs fail the tests instead of skipping them. */
    String REQUIRE_PROP = "kvc.cuda.require";

    /** The condition behind the annotation. */
    final class Condition implements ExecutionCondition {
        @Override
        public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
            if (Boolean.getBoolean(REQUIRE_PROP)) {
                return ConditionEvaluationResult.enabled(REQUIRE_PROP + "=true");
            }
            CudaRuntime.Probe probe = CudaRuntime.probe();
            return probe.usable()
                    ? ConditionEvaluationResult.enabled(probe.devices().getFirst().name())
                    : ConditionEvaluationResult.disabled("no CUDA device: " + probe.problem());
        }
    }
}
