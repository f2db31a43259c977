package dev.kvconnector.key;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/** LOCAL STUB until the keys branch lands. */
public final class KvcV1KeyScheme implements KeyScheme {
    public String name() { return "kvc-v1"; }
    public Granularity granularity() { return Granularity.CHUNK_LAYER; }
    public KeyPlan plan(KeyContext ctx, RequestTokens req) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            byte[] h = md.digest((ctx.modelId() + ctx.layout().fingerprintHex() + ctx.tpRank() + req.namespace()).getBytes(StandardCharsets.UTF_8));
            List<ChunkKeys> out = new ArrayList<>();
            int C = ctx.chunkTokens();
            for (int i = 0, s = 0; s < req.totalTokens(); i++, s += C) {
                int e = Math.min(s + C, req.totalTokens());
                md.update(h);
                for (int t = s; t < e; t++) md.update(Integer.toString(req.token(t)).getBytes());
                h = md.digest();
                String hex = HexFormat.of().formatHex(h);
                String[] lk = new String[ctx.layout().numLayers()];
                for (int l = 0; l < lk.length; l++) lk[l] = "kvc1:{" + hex + "}:L" + l;
                out.add(new ChunkKeys(i, s, e, hex, lk, "kvc1:{" + hex + "}:H", "kvc1:{" + hex + "}:M"));
            }
            return new KeyPlan(name(), granularity(), out);
        } catch (Exception ex) { throw new RuntimeException(ex); }
    }
}
