package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.demo.ByteTokenizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The multi-turn script and the order its turns become ready in. */
class ConversationsTest {
    @Test
    void theScriptIsDeterministicAndSomeConversationsOpenAsAnEarlierOneDid() {
        List<Conversations.Conversation> a = Conversations.build(8, 4, 7);
        assertEquals(a, Conversations.build(8, 4, 7));
        assertEquals(List.of(2, 6), a.stream().filter(c -> c.repeats() >= 0).map(Conversations.Conversation::index)
                .toList());
        assertEquals(a.get(0).opening(), a.get(2).opening());
        assertEquals(a.get(4).opening(), a.get(6).opening());
        assertEquals(8, a.stream().map(c -> c.followUps()).distinct().count(), "every conversation goes its own way");
        for (Conversations.Conversation c : a) {
            assertEquals(3, c.followUps().size());
            c.followUps().forEach(f -> assertTrue(f.length() >= 25 && f.length() <= 41, f));
        }
    }

    @Test
    void eachTurnIsThePreviousPromptItsAnswerAndTheNewText() throws Exception {
        List<Conversations.Conversation> script = Conversations.build(3, 3, 1);
        TurnQueue q = new TurnQueue(script, 3, 5);
        List<TurnQueue.Turn> firstTurns = List.of(q.take(), q.take());
        assertEquals(List.of(0, 1), firstTurns.stream().map(TurnQueue.Turn::conversation).sorted().toList(),
                "conversation 2 repeats 0's opening and waits for its answer");
        TurnQueue.Turn zero = firstTurns.stream().filter(t -> t.conversation() == 0).findFirst().orElseThrow();
        assertArrayEquals(ByteTokenizer.encode(script.get(0).opening()), zero.prompt());

        List<Integer> answer = List.of(200, 7, 65);
        assertEquals(0, q.answered(zero, answer));
        List<TurnQueue.Turn> ready = List.of(q.take(), q.take());
        TurnQueue.Turn second = ready.stream().filter(t -> t.conversation() == 0).findFirst().orElseThrow();
        TurnQueue.Turn repeat = ready.stream().filter(t -> t.conversation() == 2).findFirst().orElseThrow();
        assertEquals(1, second.turn());
        int[] want = IntStream.concat(IntStream.concat(Arrays.stream(zero.prompt()),
                answer.stream().mapToInt(Integer::intValue)),
                Arrays.stream(ByteTokenizer.encode(script.get(0).followUps().get(0)))).toArray();
        assertArrayEquals(want, second.prompt());
        assertArrayEquals(zero.prompt(), repeat.prompt());
    }

    @Test
    void aFailedTurnGivesUpItsConversationsLaterTurnsAndTheQueueEnds() throws Exception {
        TurnQueue q = new TurnQueue(Conversations.build(1, 4, 1), 4, 5);
        TurnQueue.Turn first = q.take();
        assertEquals(0, q.answered(first, List.of(1)));
        assertEquals(2, q.answered(q.take(), null), "turns 2 and 3 are given up");
        assertNull(q.take(), "nothing outstanding: the clients stop");
    }

    @Test
    void clientsWaitForATurnToBecomeReady() throws Exception {
        TurnQueue q = new TurnQueue(Conversations.build(1, 2, 1), 2, 5);
        TurnQueue.Turn first = q.take();
        List<TurnQueue.Turn> taken = new ArrayList<>();
        Thread client = Thread.ofVirtual().start(() -> {
            try {
                taken.add(q.take());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        Thread.sleep(100);
        assertTrue(client.isAlive(), "the second turn is not ready before the first is answered");
        q.answered(first, List.of(9));
        client.join(5_000);
        assertEquals(1, taken.getFirst().turn());
    }
}
