/**
 * The {@code mooncake://} store: FFM bindings to Mooncake Store's C ABI ({@link
 * dev.kvconnector.mooncake.MooncakeStoreLibrary}), library discovery, {@code mooncake.json} support, native error
 * mapping ({@link dev.kvconnector.mooncake.MooncakeStatus}) and the store ({@link
 * dev.kvconnector.mooncake.MooncakeStore}).
 */
package dev.kvconnector.mooncake;
