package dev.kvconnector.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

/**
 * A TEST DOUBLE of the GPU staging steps: records every call and models each buffer's state (idle, copying,
 * copied), failing the test on any call that would race real DMA: a copy into a buffer whose data was not put
 * yet, or a put from a buffer whose copy was not awaited. Can be told to throw at a given step.
 */
final class RecordingStagesTestDouble implements LayerStagingPipeline.Stages {
    private enum State { IDLE, COPYING, COPIED }

    final List<String> calls = new ArrayList<>();
    final List<Integer> putLayers = new ArrayList<>();
    private final State[] state = {State.IDLE, State.IDLE};
    private final int[] layerIn = {-1, -1};
    private String failOn = "";

    /** Makes the call whose record equals {@code call} (for example {@code put 2 b0}) throw. */
    RecordingStagesTestDouble failOn(String call) {
        this.failOn = call;
        return this;
    }

    private void record(String call) {
        calls.add(call);
        if (call.equals(failOn)) {
            throw new IllegalStateException("injected failure at " + call);
        }
    }

    @Override
    public void startCopy(int layer, int buffer) {
        assertEquals(State.IDLE, state[buffer], "copy of layer " + layer + " into b" + buffer
                + " that still holds layer " + layerIn[buffer]);
        record("copy " + layer + " b" + buffer);
        state[buffer] = State.COPYING;
        layerIn[buffer] = layer;
    }

    @Override
    public void awaitCopy(int buffer) {
        assertEquals(State.COPYING, state[buffer], "await of b" + buffer + " with no copy in flight");
        record("await b" + buffer);
        state[buffer] = State.COPIED;
    }

    @Override
    public void put(int layer, int buffer) {
        assertEquals(State.COPIED, state[buffer], "put of layer " + layer + " from b" + buffer + " before its copy");
        assertEquals(layer, layerIn[buffer], "b" + buffer + " holds another layer");
        record("put " + layer + " b" + buffer);
        putLayers.add(layer);
        state[buffer] = State.IDLE;
    }

    /** Whether no copy is left in flight: nothing writes into a buffer after the pipeline returned or threw. */
    void assertNoCopyInFlight() {
        for (int b = 0; b < state.length; b++) {
            assertTrue(state[b] != State.COPYING, "a copy into b" + b + " is still in flight: " + calls);
        }
    }
}
