package dev.kvconnector.proxy;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

/** The three scheduling policies, on instance snapshots without servers. */
class InstanceSelectorTest {

    static List<Instance> instances(int n) {
        List<Instance> out = new ArrayList<>();
        for (int k = 0; k < n; k++) {
            out.add(new Instance(Role.DECODE, new HostPort("10.0.0." + (k + 1), 8000 + k)));
        }
        return List.copyOf(out);
    }

    static void eject(Instance i) {
        i.recordProbe(false, 1, 1);
    }

    @Test
    void roundRobinVisitsEachInstanceInTurn() {
        List<Instance> list = instances(3);
        InstanceSelector rr = InstanceSelector.of(Policy.ROUND_ROBIN);
        List<Instance> picked = new ArrayList<>();
        for (int k = 0; k < 6; k++) {
            picked.add(rr.pick(list, null, 0));
        }
        assertEquals(List.of(list.get(0), list.get(1), list.get(2), list.get(0), list.get(1), list.get(2)), picked);
    }

    @Test
    void roundRobinSkipsUnhealthyAndTriedInstances() {
        List<Instance> list = instances(3);
        eject(list.get(1));
        InstanceSelector rr = InstanceSelector.of(Policy.ROUND_ROBIN);
        for (int k = 0; k < 6; k++) {
            assertNotEquals(list.get(1), rr.pick(list, null, 0));
        }
        assertSame(list.get(2), rr.pick(list, List.of(list.get(0)), 0));
        assertNull(rr.pick(list, List.of(list.get(0), list.get(2)), 0));
        assertNull(rr.pick(List.of(), null, 0));
    }

    @Test
    void leastOutstandingPicksTheLeastLoadedHealthyInstance() {
        List<Instance> list = instances(3);
        list.get(0).outstanding.set(5);
        list.get(1).outstanding.set(1);
        list.get(2).outstanding.set(0);
        eject(list.get(2));
        InstanceSelector lo = InstanceSelector.of(Policy.LEAST_OUTSTANDING);
        for (int k = 0; k < 5; k++) {
            assertSame(list.get(1), lo.pick(list, null, 0));
        }
    }

    @Test
    void leastOutstandingSpreadsTiesRoundRobin() {
        List<Instance> list = instances(4);
        InstanceSelector lo = InstanceSelector.of(Policy.LEAST_OUTSTANDING);
        Map<Instance, Integer> counts = new HashMap<>();
        for (int k = 0; k < 8; k++) {
            counts.merge(lo.pick(list, null, 0), 1, Integer::sum);
        }
        assertEquals(4, counts.size());
        counts.values().forEach(c -> assertEquals(2, c));
    }

    @Property(tries = 200)
    void prefixAffinityIsStableAndMovesOnlyTheEjectedInstancesPrompts(
            @ForAll @StringLength(min = 1, max = 40) String prompt, @ForAll @IntRange(min = 3, max = 8) int n) {
        List<Instance> list = instances(n);
        InstanceSelector pa = InstanceSelector.of(Policy.PREFIX_AFFINITY);
        long key = Hashing.fnv1a(prompt);
        Instance first = pa.pick(list, null, key);
        assertSame(first, pa.pick(list, null, key));
        Instance other = list.get(0) == first ? list.get(1) : list.get(0);
        eject(other);
        assertSame(first, pa.pick(list, null, key), "ejecting another instance moved this prompt");
        eject(first);
        Instance fallback = pa.pick(list, null, key);
        assertNotNull(fallback);
        assertNotEquals(first, fallback);
    }

    @Test
    void prefixAffinityHashesOnlyTheConfiguredPrefix() throws Exception {
        var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
        long a = PromptAffinity.hash(mapper.readTree("{\"prompt\":\"shared system prompt, question A\"}"), 20);
        long b = PromptAffinity.hash(mapper.readTree("{\"prompt\":\"shared system prompt, question B\"}"), 20);
        long c = PromptAffinity.hash(mapper.readTree("{\"prompt\":\"another system prompt, question A\"}"), 20);
        long chat = PromptAffinity.hash(mapper.readTree("{\"messages\":[{\"role\":\"system\",\"content\":"
                + "\"shared system prompt\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"B\"}]}]}"), 20);
        long tokens1 = PromptAffinity.hash(mapper.readTree("{\"prompt\":[1,2,3,4,5]}"), 3);
        long tokens2 = PromptAffinity.hash(mapper.readTree("{\"prompt\":[1,2,3,9,9]}"), 3);
        assertEquals(a, b);
        assertNotEquals(a, c);
        assertEquals(a, chat);
        assertEquals(tokens1, tokens2);
    }
}
