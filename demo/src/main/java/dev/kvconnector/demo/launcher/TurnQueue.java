package dev.kvconnector.demo.launcher;

import dev.kvconnector.demo.ByteTokenizer;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The turns of a conversation workload that are ready to send, for {@link LoadRunner#runConversations}: a turn is
 * ready once the turn before it is answered (its prompt is that turn's prompt, the answer's token ids and the new
 * text), and a conversation that repeats another's opening is ready once that one's first turn is answered.
 * Clients take ready turns at random. Thread-safe.
 */
final class TurnQueue {
    /** A turn to send: its conversation, its number from 0, and its prompt's token ids. */
    record Turn(int conversation, int turn, int[] prompt) {
    }

    private final List<Conversations.Conversation> conversations;
    private final int turns;
    private final SplittableRandom random;
    private final List<Turn> ready = new ArrayList<>();
    /** Turns neither answered nor given up. */
    private int outstanding;

    TurnQueue(List<Conversations.Conversation> conversations, int turns, long seed) {
        this.conversations = conversations;
        this.turns = turns;
        this.random = new SplittableRandom(seed);
        this.outstanding = conversations.size() * turns;
        for (Conversations.Conversation c : conversations) {
            if (c.repeats() < 0) {
                ready.add(new Turn(c.index(), 0, ByteTokenizer.encode(c.opening())));
            }
        }
    }

    /** A ready turn, waiting for one while turns are outstanding; null when every turn is answered or given up. */
    synchronized Turn take() throws InterruptedException {
        while (ready.isEmpty() && outstanding > 0) {
            wait();
        }
        return ready.isEmpty() ? null : ready.remove(random.nextInt(ready.size()));
    }

    /**
     * Records {@code t}'s answer (null when it failed) and readies what waited for it.
     *
     * @return the later turns of {@code t}'s conversation given up because it failed (0 when it was answered)
     */
    synchronized int answered(Turn t, List<Integer> answer) {
        int givenUp = answer == null ? turns - 1 - t.turn() : 0;
        outstanding -= 1 + givenUp;
        if (answer != null && t.turn() + 1 < turns) {
            String next = conversations.get(t.conversation()).followUps().get(t.turn());
            int[] text = ByteTokenizer.encode(next);
            int[] prompt = new int[t.prompt().length + answer.size() + text.length];
            System.arraycopy(t.prompt(), 0, prompt, 0, t.prompt().length);
            for (int i = 0; i < answer.size(); i++) {
                prompt[t.prompt().length + i] = answer.get(i);
            }
            System.arraycopy(text, 0, prompt, t.prompt().length + answer.size(), text.length);
            ready.add(new Turn(t.conversation(), t.turn() + 1, prompt));
        }
        if (t.turn() == 0) {
            for (Conversations.Conversation c : conversations) {
                if (c.repeats() == t.conversation()) {
                    ready.add(new Turn(c.index(), 0, ByteTokenizer.encode(c.opening())));
                }
            }
        }
        notifyAll();
        return givenUp;
    }
}
