package dev.kvconnector.paged;

/** A slot per token, as vLLM's {@code slot_mapping}: slot = block * blockSize + row. */
public final class SlotMapping implements TokenSlots {
    private final long[] slots;

    /** @param slots one slot per token (copied) */
    public SlotMapping(long[] slots) {
        this.slots = slots.clone();
    }

    @Override
    public long slot(int token) {
        return slots[token];
    }

    @Override
    public int tokens() {
        return slots.length;
    }
}
