package dev.kvconnector.tensor;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Arrays;

/**
 * A dtype and a shape (dimensions in elements, outermost first). Immutable.
 */
public final class TensorSpec {
    /** The largest rank kvconnector handles. */
    public static final int MAX_RANK = 6;

    private final DType dtype;
    private final long[] shape;
    private final long elements;

    private TensorSpec(DType dtype, long[] shape) {
        if (dtype == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "dtype is null").build();
        }
        if (shape.length > MAX_RANK) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "rank " + shape.length + " exceeds " + MAX_RANK).build();
        }
        long n = 1;
        for (long d : shape) {
            if (d < 0) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, "negative dimension in " + Arrays.toString(shape)).build();
            }
            n = Math.multiplyHigh(n, d) != 0 || n * d < 0 ? overflow(shape) : n * d;
        }
        if (Math.multiplyHigh(n, dtype.byteWidth()) != 0 || n * dtype.byteWidth() < 0) {
            overflow(shape);
        }
        this.dtype = dtype;
        this.shape = shape.clone();
        this.elements = n;
    }

    private static long overflow(long[] shape) {
        throw KVException.of(ErrorCode.SHAPE_MISMATCH, "shape " + Arrays.toString(shape) + " overflows 63 bits").build();
    }

    /** A spec with the given dtype and shape. */
    public static TensorSpec of(DType dtype, long... shape) {
        return new TensorSpec(dtype, shape);
    }

    /** The dtype. */
    public DType dtype() {
        return dtype;
    }

    /** The number of dimensions. */
    public int rank() {
        return shape.length;
    }

    /** Dimension {@code i}, in elements. */
    public long dim(int i) {
        return shape[i];
    }

    /** A copy of the shape. */
    public long[] shape() {
        return shape.clone();
    }

    /** The element count. */
    public long elementCount() {
        return elements;
    }

    /** The size in bytes. */
    public long byteSize() {
        return elements * dtype.byteWidth();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorSpec t && t.dtype == dtype && Arrays.equals(t.shape, shape);
    }

    @Override
    public int hashCode() {
        return dtype.hashCode() * 31 + Arrays.hashCode(shape);
    }

    @Override
    public String toString() {
        return dtype.name().toLowerCase(java.util.Locale.ROOT) + Arrays.toString(shape);
    }
}
