package dev.v100.converter.w4a16;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The committed fixture checkpoints (one of each packing and its quirks) convert at tp 1, 2 and 4,
 * and every W4A16 bundle tensor dequantizes to exactly the source's values.
 */
class W4A16FixtureConversionTest {
    static final JsonNode DIGESTS = W4A16Cases.digests().get("fixtures");

    @TempDir
    Path tmp;

    static Stream<Arguments> cases() {
        List<Arguments> out = new ArrayList<>();
        for (String f : W4A16Cases.FIXTURES.keySet().stream().sorted().toList()) for (int tp : new int[] {1, 2, 4}) out.add(Arguments.of(f, tp));
        return out.stream();
    }

    @ParameterizedTest(name = "{0} tp={1}")
    @MethodSource("cases")
    void convertsExactly(String fixture, int tp) {
        Map<String, W4A16Parts.Assembled> packed = W4A16Conversions.convertAndCheck(W4A16Cases.fixture(fixture), tmp.resolve("b"), tp,
                W4A16Cases.FIXTURES.get(fixture), DIGESTS.get(fixture));
        assertFalse(packed.isEmpty());
    }

    @Test
    void groupSizesFollowTheSourceAndTheCuts() {
        // per-channel attention (K = 128): stored with groups of 128 whole, 64 when tp 2 cuts o_proj's K, 32 at tp 4
        for (int tp : new int[] {1, 2, 4}) {
            Map<String, W4A16Parts.Assembled> p = W4A16Conversions.convertAndCheck(W4A16Cases.fixture("ct-channel-and-actorder-g64"),
                    tmp.resolve("c" + tp), tp, W4A16Cases.FIXTURES.get("ct-channel-and-actorder-g64"), DIGESTS.get("ct-channel-and-actorder-g64"));
            assertTrue(p.get("blk.0.attn_q.weight").groupSizes().stream().allMatch(g -> g == 128), "column-parallel keeps K whole");
            assertTrue(p.get("blk.0.attn_output.weight").groupSizes().stream().allMatch(g -> g == 128 / tp), "row-parallel at tp " + tp);
            // act-order g64 with whole groups relabelled: groups of 64 (never 128: two relabelled groups differ)
            assertTrue(p.get("blk.0.ffn_gate.weight").groupSizes().stream().allMatch(g -> g == 64));
        }
    }
}
