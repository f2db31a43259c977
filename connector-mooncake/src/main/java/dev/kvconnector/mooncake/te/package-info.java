/**
 * FFM bindings to Mooncake's Transfer Engine C ABI ({@code transfer_engine_c.h}), which moves bytes peer to peer
 * between registered memory of two processes: {@link dev.kvconnector.mooncake.te.TransferEngineLibrary} (the
 * symbols), {@link dev.kvconnector.mooncake.te.TransferEngineLocator} (finding the library),
 * {@link dev.kvconnector.mooncake.te.TransferEngineErrors} (return codes as named errors), and the API a
 * connector uses: {@link dev.kvconnector.mooncake.te.TransferEngine} and
 * {@link dev.kvconnector.mooncake.te.TransferBatch}.
 */
package dev.kvconnector.mooncake.te;
