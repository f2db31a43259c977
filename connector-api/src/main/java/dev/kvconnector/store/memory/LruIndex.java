package dev.kvconnector.store.memory;

import dev.kvconnector.store.StoreKey;
import java.util.List;
import org.agrona.collections.Object2ObjectHashMap;

/**
 * Values by key, in least-recently-used order, with no object per value or key: the keys index an Agrona
 * {@code Object2ObjectHashMap} (open addressing, so a new key makes no map node, where {@code LinkedHashMap} makes one
 * per put), and the order is a doubly-linked list through the values themselves ({@link Node}). Not thread-safe: the
 * owning store calls it under its lock.
 *
 * <p>Keys are {@link StoreKey}s. Each value owns one, into which {@link #put} copies the caller's key; the map holds
 * that copy (never the caller's key, which the caller refills), and a value reused for a later key refills its own.
 * Lookups take the caller's key and keep no reference to it. A value's key changes only while the value is out of
 * the map, so no key the map holds ever changes under it.
 *
 * @param <E> the values, each in at most one index at a time
 */
final class LruIndex<E extends LruIndex.Node<E>> {
    /**
     * What a value carries to be indexed: its key, and its neighbours in the order. The fields belong to the index
     * (package-private only because the index reaches them through its type variable). The key is the value's own, kept
     * for its next key when the value is reused; its bytes are the value's key while the value is indexed, and stale
     * after.
     */
    abstract static class Node<E extends Node<E>> {
        final StoreKey key = new StoreKey();
        E older;
        E newer;
    }

    /** Each indexed value under its own {@link Node#key}. */
    private final Object2ObjectHashMap<StoreKey, E> byKey = new Object2ObjectHashMap<>();
    private E eldest;
    private E newest;

    /** The value under {@code key}, or null; the order is unchanged. */
    E get(StoreKey key) {
        return byKey.get(key);
    }

    /** Makes {@code e}, which is indexed, the most recently used. */
    void touch(E e) {
        if (e != newest) {
            unlink(e);
            linkNewest(e);
        }
    }

    /**
     * Indexes {@code e}, which is not indexed, under a copy of {@code key} in its own key, as the most recently used.
     *
     * @return the value {@code e} replaced, no longer indexed; or null
     */
    E put(StoreKey key, E e) {
        // Out first: on a replace the map would keep the key object it holds, which is the old value's.
        E old = remove(key);
        if (e.key != key) {
            e.key.set(key);
        }
        byKey.put(e.key, e);
        linkNewest(e);
        return old;
    }

    /** Takes {@code key}'s value out of the index; returns it, or null when there was none. */
    E remove(StoreKey key) {
        E e = byKey.remove(key);
        if (e != null) {
            unlink(e);
        }
        return e;
    }

    /** The least recently used value, or null when the index is empty. */
    E eldest() {
        return eldest;
    }

    /** The value used next after {@code e} (more recently), or null when {@code e} is the newest. */
    E newer(E e) {
        return e.newer;
    }

    /** Takes {@code e}, which is indexed, out of the index. */
    void remove(E e) {
        remove(e.key);
    }

    int size() {
        return byKey.size();
    }

    /** Takes every value out of the index and adds it to {@code out}, eldest first. */
    void drainTo(List<? super E> out) {
        for (E e = eldest; e != null; ) {
            E next = e.newer;
            e.older = null;
            e.newer = null;
            out.add(e);
            e = next;
        }
        eldest = null;
        newest = null;
        byKey.clear();
    }

    private void linkNewest(E e) {
        e.older = newest;
        e.newer = null;
        if (newest == null) {
            eldest = e;
        } else {
            newest.newer = e;
        }
        newest = e;
    }

    private void unlink(E e) {
        if (e.older == null) {
            eldest = e.newer;
        } else {
            e.older.newer = e.newer;
        }
        if (e.newer == null) {
            newest = e.older;
        } else {
            e.newer.older = e.older;
        }
        e.older = null;
        e.newer = null;
    }
}
