package dev.v100.converter.inspect;

import dev.v100.converter.source.Checkpoint;
import dev.v100.converter.source.Checkpoints;
import dev.v100.converter.source.SourceTensor;
import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleException;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.TensorAssembler;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.npy.NpyDtype;
import dev.v100.formats.npy.NpyWriter;
import dev.v100.formats.safetensors.SafetensorsFile;
import dev.v100.formats.safetensors.SafetensorsTensor;
import dev.v100.formats.safetensors.StConvert;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;

/** Writes a tensor of any supported file, dequantized to float32, as .npy, streaming row by row. */
public final class TensorDump {
    /** Rows decoded per chunk: bounds memory for multi-GB tensors. */
    private static final long CHUNK_ELEMS = 1L << 22;

    private TensorDump() {}

    /** @return the shape written */
    public static long[] dump(Path path, String name, Integer rank, Path out) throws IOException {
        if (Files.isDirectory(path) && Files.isRegularFile(path.resolve(BundleManifest.MANIFEST))
                || Files.isRegularFile(path) && path.getFileName().toString().endsWith(".tar")) {
            return dumpBundle(path, name, rank, out);
        }
        if (rank != null) throw new IllegalArgumentException("--rank applies to bundles only");
        if (Files.isRegularFile(path) && path.getFileName().toString().endsWith(".safetensors")) {
            try (SafetensorsFile f = SafetensorsFile.open(path)) {
                SafetensorsTensor t = f.findTensor(name).orElseThrow(() -> new ModelFormatException(path + ": no tensor '" + name + "'"));
                long[] shape = t.shape();
                try (NpyWriter w = NpyWriter.create(out, NpyDtype.FLOAT32, shape)) {
                    long n = t.nElems();
                    for (long e = 0; e < n; e += CHUNK_ELEMS) {
                        int m = (int) Math.min(CHUNK_ELEMS, n - e);
                        w.write(StConvert.toFloats(t, f.data(t), e, m), 0, m);
                    }
                    w.finish();
                }
                return shape;
            }
        }
        try (Checkpoint c = Checkpoints.open(path)) {
            SourceTensor st = c.find(name).orElseThrow(() -> new ModelFormatException(path + ": no tensor '" + name + "'"));
            return write(c.data(st), st.shape(), out);
        }
    }

    private static long[] dumpBundle(Path path, String name, Integer rank, Path out) throws IOException {
        try (Bundle b = Bundle.open(path); Arena arena = Arena.ofConfined()) {
            if (rank != null) {
                BundleManifest.Tensor t = b.tensorsOf(rank).get(name);
                if (t == null) throw new BundleException(path + ": rank " + rank + " holds no tensor '" + name + "'");
                return write(new MappedTensor(GgmlType.byName(t.dtype()), t.storedShape(), b.checkedData(rank, t)), t.storedShape(), out);
            }
            for (BundleManifest.Rank r : b.manifest().ranks()) {
                BundleManifest.Tensor t = b.tensorsOf(r.rank()).get(name);
                if (t != null) b.checkedData(r.rank(), t);
            }
            TensorAssembler.Assembled a = TensorAssembler.assemble(b, name, arena);
            return write(new MappedTensor(a.type(), a.shape(), a.bytes()), a.shape(), out);
        }
    }

    private static long[] write(TensorData data, long[] shape, Path out) throws IOException {
        long cols = data.cols(), rows = data.rows();
        long chunkRows = Math.max(1, CHUNK_ELEMS / Math.max(1, cols));
        try (NpyWriter w = NpyWriter.create(out, NpyDtype.FLOAT32, shape)) {
            float[] buf = new float[Math.toIntExact(Math.min(rows, chunkRows) * cols)];
            for (long r = 0; r < rows; r += chunkRows) {
                long n = Math.min(chunkRows, rows - r);
                data.rowsToFloat(r, n, buf, 0);
                w.write(buf, 0, Math.toIntExact(n * cols));
            }
            w.finish();
        }
        return shape;
    }

}
