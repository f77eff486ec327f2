package dev.v100.formats.gguf;

import java.util.List;

/**
 * A GGUF array value. Elements are plain Java values of {@code elemType}: {@link Long} for every
 * integer type (UINT64 above 2^63 is the two's-complement long; use {@link Long#toUnsignedString}),
 * {@link Float}, {@link Double}, {@link Boolean}, {@link String}, or a nested {@link GgufArray}.
 */
public record GgufArray(GgufValueType elemType, List<Object> values) {
    public GgufArray {
        // lists the reader built are immutable already; anything else is copied (and null-checked)
        values = values instanceof FrozenLists.Frozen ? values : List.copyOf(values);
    }

    public int size() {
        return values.size();
    }
}
