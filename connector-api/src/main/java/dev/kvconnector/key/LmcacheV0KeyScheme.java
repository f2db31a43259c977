package dev.kvconnector.key;
/** LOCAL STUB until the keys branch lands. */
public final class LmcacheV0KeyScheme implements KeyScheme {
    public LmcacheV0KeyScheme() {}
    public LmcacheV0KeyScheme(String fmt, boolean s) {}
    public String name() { return "lmcache-v0"; }
    public Granularity granularity() { return Granularity.CHUNK; }
    public KeyPlan plan(KeyContext c, RequestTokens r) { throw new UnsupportedOperationException(); }
}
