package dev.v100.formats.gguf;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/** Exact comparisons of GGUF values: same type, same element types, floats bit for bit (NaN payloads and -0.0 included). */
final class GgufAsserts {
    private GgufAsserts() {}

    static void assertSameMetadata(Map<String, GgufValue> expected, Map<String, GgufValue> actual) {
        assertEquals(new ArrayList<>(expected.keySet()), new ArrayList<>(actual.keySet()), "keys in file order");
        for (Map.Entry<String, GgufValue> e : expected.entrySet()) assertSameValue(e.getKey(), e.getValue(), actual.get(e.getKey()));
    }

    static void assertSameValue(String where, GgufValue expected, GgufValue actual) {
        assertNotNull(actual, where + " missing");
        assertEquals(expected.type(), actual.type(), where + " type");
        assertSame(where, expected.type(), expected.value(), actual.value());
    }

    private static void assertSame(String where, GgufValueType type, Object e, Object a) {
        switch (type) {
            case FLOAT32 -> assertEquals(Float.floatToRawIntBits((Float) e), Float.floatToRawIntBits((Float) a), where + " float bits");
            case FLOAT64 -> assertEquals(Double.doubleToRawLongBits((Double) e), Double.doubleToRawLongBits((Double) a), where + " double bits");
            case ARRAY -> {
                GgufArray ea = (GgufArray) e, aa = (GgufArray) a;
                assertEquals(ea.elemType(), aa.elemType(), where + " element type");
                List<Object> ev = ea.values(), av = aa.values();
                assertEquals(ev.size(), av.size(), where + " size");
                for (int i = 0; i < ev.size(); i++) assertSame(where + "[" + i + "]", ea.elemType(), ev.get(i), av.get(i));
            }
            default -> assertEquals(e, a, where);
        }
    }
}
