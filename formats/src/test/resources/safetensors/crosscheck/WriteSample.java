import dev.v100.formats.safetensors.*;
import java.nio.*;
import java.nio.file.*;

public class WriteSample {
    public static void main(String[] a) throws Exception {
        SafetensorsWriter w = new SafetensorsWriter().metadata("format", "pt").metadata("writer", "v100");
        for (StDtype t : StDtype.values()) {
            long[] shape = t.bitsPerElem % 8 == 0 ? new long[] {2, 3} : new long[] {4, 2};
            long bytes = t.byteSize(shape[0] * shape[1]);
            byte[] b = new byte[(int) bytes];
            for (int i = 0; i < b.length; i++) b[i] = (byte) (i * 37 + t.wireName.length());
            if (t == StDtype.BOOL) for (int i = 0; i < b.length; i++) b[i] = (byte) (i & 1);
            w.add("t." + t.wireName, t, shape, b);
        }
        w.addF32("scalar", new long[0], new float[] {3.5f});
        w.add("empty", StDtype.F32, new long[] {0, 4}, new byte[0]);
        w.addF32("f32.values", new long[] {4}, new float[] {1f, -2.5f, 1e-30f, Float.MAX_VALUE});
        w.write(Path.of(a[0]));
    }
}
