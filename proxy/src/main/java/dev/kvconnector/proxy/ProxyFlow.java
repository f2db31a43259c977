package dev.kvconnector.proxy;

/**
 * How the proxy hands a request to a prefill (P) and a decode (D) instance.
 */
public enum ProxyFlow {
    /**
     * vLLM V0 style: P gets a copy with {@code max_tokens=1} (and {@code max_completion_tokens=1} when
     * present) and its answer is discarded; then D gets the original request. P and D meet through the KV
     * store, keyed by the prompt.
     */
    V0,
    /**
     * vLLM V1 style: P gets {@code kv_transfer_params={"do_remote_decode":true,"do_remote_prefill":false}},
     * {@code stream=false}, {@code max_tokens=1}; the {@code kv_transfer_params} object of P's answer is
     * copied into D's request.
     */
    V1,
    /**
     * P and D get the request at the same time, sharing a {@code transfer_id} in {@code kv_transfer_params},
     * so a layer-wise connector on D can load layer i while P computes layer i+1. D's params also name P's
     * {@code remote_host}/{@code remote_port}, so a peer-to-peer D can tell P where to write.
     */
    CONCURRENT
}
