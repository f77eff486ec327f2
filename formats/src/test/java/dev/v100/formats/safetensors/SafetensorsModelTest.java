package dev.v100.formats.safetensors;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/** Single-file and sharded checkpoints, including the index rows of §4.5 (missing shard, tensor twice, unknown name). */
class SafetensorsModelTest {
    static final String S1 = "model-00001-of-00002.safetensors";
    static final String S2 = "model-00002-of-00002.safetensors";

    @TempDir
    Path dir;

    void shard(String name, String... tensors) {
        SafetensorsWriter w = new SafetensorsWriter().metadata("format", "pt");
        for (String t : tensors) w.addF32(t, new long[] {2}, new float[] {t.length(), t.hashCode()});
        w.write(dir.resolve(name));
    }

    void index(String json) throws IOException {
        Files.writeString(dir.resolve(SafetensorsModel.INDEX_FILE), json);
    }

    static String map(String... nameShard) {
        StringBuilder sb = new StringBuilder("{\"metadata\":{\"total_size\":48,\"extra\":{\"x\":[1]}},\"weight_map\":{");
        for (int i = 0; i < nameShard.length; i += 2) {
            if (i > 0) sb.append(',');
            sb.append('"').append(nameShard[i]).append("\":\"").append(nameShard[i + 1]).append('"');
        }
        return sb.append("},\"unrelated\":true}").toString();
    }

    void twoShards() throws IOException {
        shard(S1, "a", "b");
        shard(S2, "c");
        index(map("a", S1, "b", S1, "c", S2));
    }

    @Test
    void shardedCheckpoint() throws IOException {
        twoShards();
        try (SafetensorsModel m = SafetensorsModel.open(dir)) {
            assertEquals(List.of("a", "b", "c"), m.tensors().stream().map(SafetensorsTensor::name).toList());
            assertEquals(2, m.files().size());
            assertTrue(m.hasTensor("c"));
            assertFalse(m.hasTensor("d"));
            SafetensorsTensor c = m.tensor("c");
            assertEquals(dir.resolve(S2), m.fileOf(c).file());
            assertArrayEquals(new float[] {1, "c".hashCode()}, m.data(c).toArray(ValueLayout.JAVA_FLOAT_UNALIGNED));
            assertEquals(48, m.indexMetadata().orElseThrow().get("total_size").asLong());
            assertEquals(dir.resolve(SafetensorsModel.INDEX_FILE), m.source());
        }
        try (SafetensorsModel m = SafetensorsModel.open(dir.resolve(SafetensorsModel.INDEX_FILE))) {
            assertEquals(3, m.tensors().size());
        }
    }

    @Test
    void singleFileAndDirectoryWithModelSafetensors() {
        shard(SafetensorsModel.SINGLE_FILE, "x", "y");
        try (SafetensorsModel m = SafetensorsModel.open(dir)) {
            assertEquals(2, m.tensors().size());
            assertTrue(m.indexMetadata().isEmpty());
        }
        try (SafetensorsModel m = SafetensorsModel.open(dir.resolve(SafetensorsModel.SINGLE_FILE))) {
            assertEquals("x", m.tensors().getFirst().name());
        }
    }

    @Test
    void unknownTensorName() throws IOException {
        twoShards();
        try (SafetensorsModel m = SafetensorsModel.open(dir)) {
            var e = assertThrows(ModelFormatException.class, () -> m.tensor("model.nope.weight"));
            assertTrue(e.getMessage().contains("no tensor named 'model.nope.weight'"), e.getMessage());
            assertTrue(m.findTensor("model.nope.weight").isEmpty());
            SafetensorsTensor alien = new SafetensorsTensor("a", StDtype.F32, new long[] {3}, 0, 12);
            assertThrows(IllegalArgumentException.class, () -> m.data(alien));
        }
    }

    @Test
    void missingShard() throws IOException {
        shard(S1, "a", "b");
        index(map("a", S1, "b", S1, "c", S2));
        var e = assertThrows(InvalidModelFileException.class, () -> SafetensorsModel.open(dir));
        assertTrue(e.getMessage().contains("shard " + S2 + " is missing"), e.getMessage());
        assertEquals("weight_map.c", e.field());
    }

    @Test
    void tensorListedButAbsentFromItsShard() throws IOException {
        shard(S1, "a");
        shard(S2, "c");
        index(map("a", S1, "b", S1, "c", S2));
        var e = assertThrows(InvalidModelFileException.class, () -> SafetensorsModel.open(dir));
        assertTrue(e.getMessage().contains("puts tensor 'b' in " + S1 + " but that shard has no such tensor"), e.getMessage());
    }

    @Test
    void tensorInTwoShards() throws IOException {
        shard(S1, "a", "b");
        shard(S2, "b", "c");
        index(map("a", S1, "b", S1, "c", S2));
        var e = assertThrows(InvalidModelFileException.class, () -> SafetensorsModel.open(dir));
        assertTrue(e.getMessage().contains("'b' is in shard " + S2 + " but the weight_map puts it in " + S1), e.getMessage());
        assertEquals(dir.resolve(S2), e.file());
    }

    @Test
    void tensorInAShardButNotInTheIndex() throws IOException {
        shard(S1, "a", "stray");
        shard(S2, "c");
        index(map("a", S1, "c", S2));
        var e = assertThrows(InvalidModelFileException.class, () -> SafetensorsModel.open(dir));
        assertTrue(e.getMessage().contains("'stray' is in shard " + S1 + " but not in the weight_map"), e.getMessage());
    }

    @Test
    void duplicateKeyInWeightMap() throws IOException {
        twoShards();
        index("{\"weight_map\":{\"a\":\"" + S1 + "\",\"a\":\"" + S2 + "\",\"b\":\"" + S1 + "\",\"c\":\"" + S2 + "\"}}");
        var e = assertThrows(InvalidModelFileException.class, () -> SafetensorsModel.open(dir));
        assertTrue(e.getMessage().contains("Duplicate field 'a'"), e.getMessage());
    }

    @Test
    void malformedIndexes() throws IOException {
        twoShards();
        for (String bad : List.of("[]", "{\"metadata\":{}}", "{\"weight_map\":[]}", "{\"weight_map\":{}}",
                "{\"weight_map\":{\"a\":1}}", "{\"weight_map\":{\"a\":\"../x.safetensors\"}}",
                "{\"weight_map\":{\"a\":\"/etc/passwd\"}}", "{\"metadata\":3,\"weight_map\":{\"a\":\"" + S1 + "\"}}", "{\"weight_map\":")) {
            index(bad);
            assertThrows(InvalidModelFileException.class, () -> SafetensorsModel.open(dir), bad);
        }
    }

    @Test
    void truncatedShard() throws IOException {
        twoShards();
        byte[] b = Files.readAllBytes(dir.resolve(S2));
        Files.write(dir.resolve(S2), Arrays.copyOf(b, b.length - 1));
        var e = assertThrows(InvalidModelFileException.class, () -> SafetensorsModel.open(dir));
        assertEquals(dir.resolve(S2), e.file());
        assertTrue(e.getMessage().contains("runs past the data section"), e.getMessage());
    }

    @Test
    void directoryWithoutCheckpoint() throws IOException {
        Files.writeString(dir.resolve("consolidated.safetensors"), "x");
        var e = assertThrows(ModelFormatException.class, () -> SafetensorsModel.open(dir));
        assertTrue(e.getMessage().contains("consolidated.safetensors"), e.getMessage());
        assertThrows(ModelFormatException.class, () -> SafetensorsModel.open(dir.resolve("nothing-here")));
    }
}
