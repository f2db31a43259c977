package dev.kvconnector.connector.multi;

import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.tensor.Tensor;
import java.util.List;

/**
 * One insert into every composed connector: each call goes to each session in order. The commit commits each and
 * throws the first failure afterwards, the others suppressed. Not thread-safe, as any insert session.
 */
final class MultiInsertSession implements InsertSession {
    private final List<InsertSession> sessions;
    private final List<Boolean> holdsHidden;

    MultiInsertSession(List<InsertSession> sessions, List<Boolean> holdsHidden) {
        this.sessions = sessions;
        this.holdsHidden = holdsHidden;
    }

    @Override
    public int tokens() {
        return sessions.getFirst().tokens();
    }

    @Override
    public void putLayer(int layer, LayerSource source) {
        for (InsertSession s : sessions) {
            s.putLayer(layer, source);
        }
    }

    @Override
    public void putLayers(LayerSource source) {
        for (InsertSession s : sessions) {
            s.putLayers(source);
        }
    }

    /** Puts the hidden states into the connectors that hold them. */
    @Override
    public void putHidden(Tensor hidden) {
        for (int i = 0; i < sessions.size(); i++) {
            if (holdsHidden.get(i)) {
                sessions.get(i).putHidden(hidden);
            }
        }
    }

    /** Commits every session; the first failure is thrown after all were tried. */
    @Override
    public void commit() {
        MultiConnector.eachThenThrow(sessions, InsertSession::commit);
    }

    @Override
    public void abort() {
        sessions.forEach(InsertSession::abort);
    }

    @Override
    public void close() {
        sessions.forEach(InsertSession::close);
    }
}
