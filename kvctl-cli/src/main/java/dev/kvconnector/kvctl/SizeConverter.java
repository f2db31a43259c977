package dev.kvconnector.kvctl;

import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/** Parses a byte size option such as {@code 4GiB}, {@code 512MiB} or {@code 1048576} (units as in store URIs). */
final class SizeConverter implements ITypeConverter<Long> {
    @Override
    public Long convert(String value) {
        try {
            return StoreUri.parseSize("size", value, "kvctl");
        } catch (KVException e) {
            throw new TypeConversionException("'" + value + "' is not a size such as 4GiB, 512MiB or 1048576");
        }
    }
}
