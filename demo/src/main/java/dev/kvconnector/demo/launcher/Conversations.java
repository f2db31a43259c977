package dev.kvconnector.demo.launcher;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The multi-turn workload's script: conversations about one of two shared documents, in which each turn's prompt is
 * the previous turn's prompt, the answer to it, and new text (the answers come from the engines, so
 * {@link LoadRunner#runConversations} builds the prompts as it goes). Deterministic for a seed.
 *
 * <ul>
 *   <li>Each conversation opens with a document (about 90 bytes, the same for every other conversation, as a
 *       system prompt or a file that many users ask about) and a question.</li>
 *   <li>Conversations 2, 6, 10, ... open with exactly the words of conversation 0, 4, 8, ...: another user asking
 *       the same first question about the same document, after the first user's answer. Their openings are the
 *       only prompts sent twice, so a store that holds them whole can serve them without a prefill.</li>
 *   <li>Each later turn adds 24 to 40 bytes of new text.</li>
 * </ul>
 */
final class Conversations {
    private static final String[] DOCUMENTS = {
        "Document: a paged KV cache keeps keys and values in fixed blocks, so sequences share memory without copies.",
        "Document: disaggregated serving runs the prefill on one node and the decode on another, moving the KV cache.",
    };
    private static final String[] QUESTIONS = {
        " Question: why are blocks a fixed size?", " Question: what moves between the nodes?",
        " Question: how is a block found again?", " Question: what does the decode node wait for?",
        " Question: when is a block freed?", " Question: which node computes the first token?",
    };
    private static final String[] WORDS = ("the a cache layer token prefill decode store key value block page "
            + "tensor engine proxy request stream latency memory transfer hidden state model head query attention "
            + "shared prefix node batch queue first time why how when").split(" ");

    /**
     * One conversation.
     *
     * @param index     its number, from 0
     * @param opening   the first turn's prompt
     * @param followUps the new text of each later turn, in order
     * @param repeats   the conversation whose opening this one repeats (and which it starts after), or -1
     */
    record Conversation(int index, String opening, List<String> followUps, int repeats) {
    }

    private Conversations() {
    }

    /**
     * Builds {@code n} conversations of {@code turns} turns each.
     *
     * @param seed the random seed; the same seed gives the same script
     */
    static List<Conversation> build(int n, int turns, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        List<Conversation> out = new ArrayList<>(n);
        for (int c = 0; c < n; c++) {
            int repeats = c % 4 == 2 ? c - 2 : -1;
            String opening = repeats >= 0 ? out.get(repeats).opening()
                    : DOCUMENTS[c % DOCUMENTS.length] + QUESTIONS[(c / 2) % QUESTIONS.length];
            List<String> followUps = new ArrayList<>(turns - 1);
            for (int t = 1; t < turns; t++) {
                int target = 24 + rnd.nextInt(17);
                StringBuilder sb = new StringBuilder(" User:");
                while (sb.length() < target) {
                    sb.append(' ').append(WORDS[rnd.nextInt(WORDS.length)]);
                }
                sb.setLength(target);
                followUps.add(sb.append('?').toString());
            }
            out.add(new Conversation(c, opening, List.copyOf(followUps), repeats));
        }
        return out;
    }
}
