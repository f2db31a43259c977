package dev.kvconnector.store.tiered;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreUri;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The tiers of a {@code tiered:} URI: checked, opened, and what they can do together. */
final class TierList {
    private TierList() {
    }

    /**
     * Opens the tiers that {@code uri} lists, in order, after checking the list; on a failure closes those already
     * open.
     *
     * @throws KVException {@code INVALID_URI} for an empty list, a tier named twice or a {@code tiered:} tier; the
     *     error of a tier that cannot open, naming it
     */
    static List<KVStore> open(StoreUri uri) {
        List<String> inner = uri.nested();
        if (inner.isEmpty()) {
            throw invalid(uri.masked(), "a tiered: store needs at least one tier",
                    "list the tiers fastest first, each in [ ]: tiered:[shm:/kv][valkey://host:6379]");
        }
        Map<String, Integer> seen = new HashMap<>();
        for (int i = 0; i < inner.size(); i++) {
            StoreUri tier = parseTier(uri.masked(), i, inner.get(i));
            if (tier.scheme().equals("tiered")) {
                throw invalid(uri.masked(), "tier " + (i + 1) + " is itself a tiered: store",
                        "list its tiers in this one instead of nesting it");
            }
            String identity = KVStores.storeIdentity(tier);
            Integer before = identity == null ? null : seen.putIfAbsent(identity, i + 1);
            if (before != null) {
                throw invalid(uri.masked(), "tiers " + before + " and " + (i + 1) + " name the same store ("
                        + tier.masked() + ")", "each tier must be a different store");
            }
        }
        List<KVStore> opened = new ArrayList<>(inner.size());
        try {
            for (int i = 0; i < inner.size(); i++) {
                opened.add(openTier(uri.masked(), i, inner.size(), inner.get(i)));
            }
            return opened;
        } catch (RuntimeException e) {
            closeAll(opened, e);
            throw e;
        }
    }

    private static KVStore openTier(String uri, int index, int count, String text) {
        try {
            return KVStores.open(text);
        } catch (KVException e) {
            throw KVException.of(e.code(), "tier " + (index + 1) + " of " + count + " cannot open: " + e.getMessage())
                    .store(uri).operation("open").hint(e.hint()).cause(e).build();
        }
    }

    private static StoreUri parseTier(String uri, int index, String text) {
        try {
            return StoreUri.parse(text);
        } catch (KVException e) {
            throw KVException.of(ErrorCode.INVALID_URI, "tier " + (index + 1) + ": " + e.getMessage()).store(uri)
                    .hint(e.hint()).build();
        }
    }

    static Set<StoreCapability> capabilities(String uri, KVStore[] tiers) {
        Set<StoreCapability> first = tiers[0].capabilities();
        Set<StoreCapability> caps = EnumSet.noneOf(StoreCapability.class);
        for (StoreCapability c : List.of(StoreCapability.CLAIM, StoreCapability.VIEW)) {
            if (first.contains(c)) {
                caps.add(c);
            }
        }
        for (KVStore t : tiers) {
            if (t.capabilities().contains(StoreCapability.EVENTS)) {
                caps.add(StoreCapability.EVENTS);
            }
        }
        for (StoreCapability c : List.of(StoreCapability.REMOVE, StoreCapability.NATIVE_TTL,
                StoreCapability.SHARED_ACROSS_PROCESSES, StoreCapability.LOCAL_MEMORY)) {
            boolean all = true;
            for (KVStore t : tiers) {
                all &= t.capabilities().contains(c);
            }
            if (all) {
                caps.add(c);
            }
        }
        List<String> cannotRemove = new ArrayList<>();
        for (KVStore t : tiers) {
            if (t.capabilities().contains(StoreCapability.IMMUTABLE)) {
                caps.add(StoreCapability.IMMUTABLE);
            }
            if (!t.capabilities().contains(StoreCapability.REMOVE)) {
                cannotRemove.add(t.uri());
            }
        }
        if (!cannotRemove.isEmpty() && cannotRemove.size() < tiers.length) {
            throw invalid(uri, "only some tiers can remove objects; " + String.join(", ", cannotRemove)
                    + " cannot, so a removal or a consuming drop-select would leave the object there and a waiting "
                    + "write-back could not be cancelled", "use tiers that all declare REMOVE, or all do not (and "
                    + "DropMode.RETAIN)");
        }
        return Set.copyOf(caps);
    }

    static KVException invalid(String uri, String detail, String hint) {
        return KVException.of(ErrorCode.INVALID_URI, detail).store(uri).hint(hint).build();
    }

    static void closeAll(List<KVStore> stores, RuntimeException cause) {
        for (KVStore s : stores) {
            try {
                s.close();
            } catch (RuntimeException e) {
                cause.addSuppressed(e);
            }
        }
    }
}
