package dev.v100.converter.source;

import dev.v100.formats.ggml.GgmlType;

import java.util.Arrays;

/**
 * A tensor of a source checkpoint under its source name.
 *
 * @param type     its storage as a ggml type, or null when it has none (e.g. safetensors F8_E4M3, I32 packs)
 * @param dtype    the source's own dtype name (GGUF type name or safetensors dtype)
 * @param shape    PyTorch order, outermost first
 */
public record SourceTensor(String name, GgmlType type, String dtype, long[] shape, long byteSize) {
    public SourceTensor {
        shape = shape.clone();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    public long nElems() {
        long n = 1;
        for (long d : shape) n = Math.multiplyExact(n, d);
        return n;
    }

    @Override
    public String toString() {
        return name + " " + dtype + " " + Arrays.toString(shape);
    }
}
