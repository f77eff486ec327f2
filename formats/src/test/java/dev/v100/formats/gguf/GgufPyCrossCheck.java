package dev.v100.formats.gguf;

import dev.v100.formats.ggml.GgmlType;

import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * One-off cross-check with gguf-py (not a test; CI never runs Python): writes N random GGUF files
 * (GgufSpecs; every value type, every ggml type gguf-py 0.19 sizes like ggml, i.e. not Q2_0 and not
 * Q8_1, whose size gguf-py still has as 40 bytes) plus a 4-way split set with alignment 64, each with
 * a canonical {@code .expected} listing of what was written. Then
 * {@code /work/pyenv/bin/python formats/src/test/resources/gguf/gguf_py_crosscheck.py DIR} reads
 * every file with gguf-py's GGUFReader and compares.
 *
 * <pre>java -cp formats/target/classes:formats/target/test-classes:DEPS dev.v100.formats.gguf.GgufPyCrossCheck DIR 300</pre>
 */
public final class GgufPyCrossCheck {
    static String canon(GgufValueType t, Object v) {
        return switch (t) {
            case UINT8, UINT16, UINT32, UINT64 -> Long.toUnsignedString((Long) v);
            case INT8, INT16, INT32, INT64 -> Long.toString((Long) v);
            case FLOAT32 -> Integer.toHexString(Float.floatToRawIntBits((Float) v));
            case FLOAT64 -> Long.toHexString(Double.doubleToRawLongBits((Double) v));
            case BOOL -> v.toString();
            case STRING -> HexFormat.of().formatHex(((String) v).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            case ARRAY -> {
                GgufArray a = (GgufArray) v;
                StringBuilder sb = new StringBuilder("ARRAY<" + a.elemType() + ">[");
                for (int i = 0; i < a.size(); i++) sb.append(i == 0 ? "" : ",").append(canon(a.elemType(), a.values().get(i)));
                yield sb.append(']').toString();
            }
        };
    }

    static void expect(Path gguf, Map<String, GgufValue> kv, List<GgufSpecs.TensorSpec> ts, int split) throws Exception {
        try (PrintWriter pw = new PrintWriter(Files.newBufferedWriter(Path.of(gguf + ".expected")));
             GgufFile f = GgufFile.open(gguf)) {
            for (var e : kv.entrySet()) pw.println("kv " + HexFormat.of().formatHex(e.getKey().getBytes("UTF-8")) + " " + e.getValue().type() + " " + canon(e.getValue().type(), e.getValue().value()));
            pw.println("data_offset " + f.dataStart(split));
            for (var t : ts) {
                MessageDigest md = MessageDigest.getInstance("SHA-256");
                pw.println("tensor " + t.name() + " " + t.type() + " " + java.util.Arrays.toString(GgufTensor.shapeToGgufDims(t.shape())) + " " + HexFormat.of().formatHex(md.digest(t.data())));
            }
        }
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        int n = Integer.parseInt(args[1]);
        var gen = GgufSpecs.specs().filter(s -> s.tensors().stream().noneMatch(t -> t.type() == GgmlType.Q2_0 || t.type() == GgmlType.Q8_1));
        var it = gen.sampleStream().iterator();
        for (int i = 0; i < n; i++) {
            GgufSpecs.Spec s = it.next();
            Path p = out.resolve("r" + i + ".gguf");
            GgufWriter w = s.writer();
            w.write(p);
            expect(p, w.metadata(), s.tensors(), 0);
        }
        // a split set with alignment 64: split 0 has the model KVs, the others the split keys (+ general.alignment)
        GgufWriter w = new GgufWriter().putString("general.architecture", "llama").alignment(64).putUint32("llama.block_count", 2);
        List<GgufSpecs.TensorSpec> all = new java.util.ArrayList<>();
        GgmlType[] types = {GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0, GgmlType.Q4_K, GgmlType.Q6_K, GgmlType.IQ4_XS};
        java.util.Random r = new java.util.Random(7);
        for (int k = 0; k < 7; k++) {
            GgmlType t = types[k];
            long[] shape = {3, 2L * Math.max(t.blockSize, 32)};
            byte[] d = new byte[(int) (shape[0] * shape[1] / t.blockSize * t.typeSize)];
            r.nextBytes(d);
            all.add(new GgufSpecs.TensorSpec("blk." + k + ".w", t, shape, d));
            w.addTensor("blk." + k + ".w", t, shape, MemorySegment.ofArray(d));
        }
        List<Path> splits = w.writeSplits(out.resolve("split.gguf"), 2000);
        try (GgufFile f = GgufFile.open(splits.getFirst())) {
            int ti = 0;
            for (int i = 0; i < splits.size(); i++) {
                int cnt = 0;
                for (GgufTensor t : f.tensors()) if (t.fileIndex() == i) cnt++;
                expect(splits.get(i), f.metadata(i).asMap(), all.subList(ti, ti + cnt), i);
                ti += cnt;
            }
        }
        System.out.println("wrote " + n + " random files and " + splits.size() + " splits");
    }
}
