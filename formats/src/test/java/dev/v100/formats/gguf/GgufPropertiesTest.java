package dev.v100.formats.gguf;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/** write -> read gives back every KV (type and value, bit for bit) and every tensor; dims reversal is an involution. */
class GgufPropertiesTest {
    @Provide
    Arbitrary<GgufSpecs.Spec> specs() {
        return GgufSpecs.specs();
    }

    @Property(tries = 400)
    void writeThenReadGivesEverythingBack(@ForAll("specs") GgufSpecs.Spec spec) {
        GgufWriter w = spec.writer();
        byte[] b = spec.bytes();
        assertEquals(w.plannedBytes(), b.length);
        try (GgufFile f = GgufFile.parse(Path.of("roundtrip.gguf"), b)) {
            assertEquals(3, f.version());
            assertEquals(spec.alignment(), f.alignment());
            assertTrue(f.warnings().isEmpty(), f.warnings().toString());
            GgufAsserts.assertSameMetadata(w.metadata(), f.metadata().asMap());

            GgufLayout layout = GgufLayout.walk(b);
            long align = spec.alignment();
            assertEquals((layout.infosEnd + align - 1) / align * align, f.dataStart(0), "data_start = align_up(end of infos)");
            List<GgufSpecs.TensorSpec> ts = spec.tensors();
            assertEquals(ts.size(), f.tensors().size());
            long offset = 0;
            for (int i = 0; i < ts.size(); i++) {
                GgufSpecs.TensorSpec e = ts.get(i);
                GgufTensor t = f.tensors().get(i);
                assertEquals(e.name(), t.name());
                assertEquals(e.type(), t.type(), e.name());
                assertArrayEquals(e.shape(), t.shape(), e.name());
                assertArrayEquals(GgufTensor.shapeToGgufDims(e.shape()), t.ne(), e.name());
                assertEquals(f.dataStart(0) + offset, t.offsetBytes(), e.name() + ": contiguous, padded offsets");
                assertArrayEquals(e.data(), f.data(t).toArray(ValueLayout.JAVA_BYTE), e.name());
                offset += (e.data().length + align - 1) / align * align;
            }
            assertEquals(f.dataStart(0) + offset, b.length, "file ends after the last padded tensor");
        }
    }

    @Provide
    Arbitrary<long[]> shapes() {
        return Arbitraries.longs().between(0, Long.MAX_VALUE).list().ofMinSize(0).ofMaxSize(GgufFile.MAX_DIMS)
                .map(l -> l.stream().mapToLong(Long::longValue).toArray());
    }

    @Property
    void dimsReversalIsAnInvolution(@ForAll("shapes") long[] shape) {
        long[] ne = GgufTensor.shapeToGgufDims(shape);
        for (int j = 0; j < ne.length; j++) assertEquals(shape[shape.length - 1 - j], ne[j]);
        assertArrayEquals(shape, GgufTensor.ggufDimsToShape(ne));
    }
}
