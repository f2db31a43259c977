package dev.kvconnector.store;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * The errors of a misused {@link StoreClaim} or {@link StoreView} handle, worded once for every store that has them:
 * a handle of another store, a handle still holding its last claim or view, a handle that holds nothing.
 */
public final class HandleErrors {
    private HandleErrors() {
    }

    /** A claim handle from another store's {@code newClaim()}. */
    public static KVException foreignClaim(String storeUri, String key) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the claim handle does not belong to this store")
                .store(storeUri).operation("tryClaim").key(key).hint("get handles from the same store's newClaim()")
                .build();
    }

    /** A claim handle that still holds its claim on {@code heldKey}. */
    public static KVException claimStillHeld(String storeUri, String heldKey, String key) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the claim handle still holds a claim on "
                        + KVException.shortenKey(heldKey)).store(storeUri).operation("tryClaim").key(key)
                .hint("commit() or abort() it before the next tryClaim").build();
    }

    /** A claim handle used for {@code op} while it holds no claim. */
    public static KVException noClaim(String storeUri, String op) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the claim handle holds no claim").store(storeUri)
                .operation(op).hint("tryClaim must return CLAIMED first; commit and abort empty the handle").build();
    }

    /** A view handle from another store's {@code newView()}. */
    public static KVException foreignView(String storeUri, String key) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the view handle does not belong to this store")
                .store(storeUri).operation("tryView").key(key).hint("get handles from the same store's newView()")
                .build();
    }

    /** A view handle that still holds its last object. */
    public static KVException viewStillHeld(String storeUri, String key) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the view handle still holds an object").store(storeUri)
                .operation("tryView").key(key).hint("release() it before the next tryView").build();
    }

    /** A view handle asked for its segment while it holds no object. */
    public static KVException noView(String storeUri) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the view handle holds no object").store(storeUri)
                .operation("segment").hint("tryView must return a hit first; release empties the handle").build();
    }

    /** A view handle released while it holds no object. */
    public static KVException releasedTwice(String storeUri) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "the view handle holds no object: released twice?")
                .store(storeUri).operation("release")
                .hint("release each hit of tryView once; close() is the idempotent form").build();
    }
}
