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
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.npy.NpyDtype;
import dev.v100.formats.npy.NpyWriter;
import dev.v100.formats.safetensors.SafetensorsFile;
import dev.v100.formats.safetensors.SafetensorsTensor;
import dev.v100.formats.safetensors.StConvert;
import dev.v100.formats.w4a16.W4A16Layout;

import java.io.IOException;
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
        try (Bundle b = Bundle.open(path)) {
            if (rank != null) {
                BundleManifest.Tensor t = b.tensorsOf(rank).get(name);
                if (t == null) throw new BundleException(path + ": rank " + rank + " holds no tensor '" + name + "'");
                float[] v = storedFloats(b, rank, t);
                try (NpyWriter w = NpyWriter.create(out, NpyDtype.FLOAT32, t.storedShape())) {
                    w.write(v, 0, v.length);
                    w.finish();
                }
                return t.storedShape();
            }
            // put the full tensor together in float from every rank's decoded slice (any stored dtype)
            long[] shape = null;
            float[] full = null;
            for (BundleManifest.Rank r : b.manifest().ranks()) {
                BundleManifest.Tensor t = b.tensorsOf(r.rank()).get(name);
                if (t == null) continue;
                if (full == null) {
                    shape = t.shape();
                    long n = 1;
                    for (long d : shape) n = Math.multiplyExact(n, d);
                    if (n > Integer.MAX_VALUE - 8) throw new BundleException(name + ": " + n + " elements are too many to dump whole; use --rank");
                    full = new float[(int) n];
                }
                scatter(storedFloats(b, r.rank(), t), t, shape, full);
            }
            if (full == null) throw new BundleException(path + ": no tensor '" + name + "' in any rank");
            try (NpyWriter w = NpyWriter.create(out, NpyDtype.FLOAT32, shape)) {
                w.write(full, 0, full.length);
                w.finish();
            }
            return shape;
        }
    }

    /** A rank's stored slice decoded to float (CRC checked first). */
    private static float[] storedFloats(Bundle b, int rank, BundleManifest.Tensor t) {
        MemorySegment bytes = b.checkedData(rank, t);
        long[] s = t.storedShape();
        long n = 1;
        for (long d : s) n = Math.multiplyExact(n, d);
        float[] out = new float[Math.toIntExact(n)];
        if (t.dtype().equals(W4A16Layout.DTYPE)) {
            long cols = s[s.length - 1], rows = n / cols;
            int gs = ((Number) t.quant().get(W4A16Layout.QUANT_GROUP_SIZE)).intValue();
            Object stored = t.quant().get(W4A16Layout.QUANT_STORED_COLUMNS);
            if (stored instanceof Number k2) {   // act-order: stored columns back in input order
                W4A16Layout.Geometry g = new W4A16Layout.Geometry(rows, k2.longValue(), gs);
                long matrices = s.length >= 3 ? rows / s[s.length - 2] : 1;
                return W4A16Layout.dequantizeIndexed(bytes, g, matrices, cols);
            }
            W4A16Layout.Geometry g = new W4A16Layout.Geometry(rows, cols, gs);
            W4A16Layout.dequantizeRows(bytes, g, 0, Math.toIntExact(rows), out, 0);
        } else {
            GgmlType type = GgmlType.byName(t.dtype());
            new MappedTensor(type, s, bytes).rowsToFloat(0, n / s[s.length - 1], out, 0);
        }
        return out;
    }

    /** Places a slice's values at their positions in the full tensor (row-major, PyTorch shape). */
    private static void scatter(float[] part, BundleManifest.Tensor t, long[] shape, float[] full) {
        BundleManifest.Slice s = t.slice();
        if (s == null) {
            System.arraycopy(part, 0, full, 0, part.length);
            return;
        }
        int d = s.dim();
        long outer = 1, inner = 1;
        for (int i = 0; i < d; i++) outer *= shape[i];
        for (int i = d + 1; i < shape.length; i++) inner *= shape[i];
        int pos = 0;
        for (long o = 0; o < outer; o++) {
            for (BundleManifest.Range rg : s.ranges()) {
                int n = Math.toIntExact(rg.length() * inner);
                System.arraycopy(part, pos, full, Math.toIntExact((o * shape[d] + rg.start()) * inner), n);
                pos += n;
            }
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
