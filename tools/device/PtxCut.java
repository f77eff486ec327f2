import dev.v100.kernels.cuda.PtxModule;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Cuts kernels out of a built PTX module into a small module of their own (the module-scope text and those entries), for
 * the GEMV lab's GEMV_PTX and GLU_PTX (gemv_lab.cu: time a kernel as the runtime loads it, NVRTC 12.9's compute_70 PTX through the
 * driver's JIT, beside nvcc's own sm_90 build of the same source). Run with the kernels module built:
 * <pre>
 *   java -cp kernels/target/classes tools/device/PtxCut.java kernels/target/classes/dev/v100/kernels/cuda/ptx/gemv.ptx \
 *       tools/device/lab.ptx gemv_x16_w4a16_glu gemv_x16_w4a16_multi
 * </pre>
 * (the output is small enough to travel with a device call; the whole gemv.ptx is 7.5 MB).
 */
public class PtxCut {
    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: PtxCut MODULE.ptx OUT.ptx KERNEL...");
            System.exit(2);
        }
        Path in = Path.of(args[0]);
        PtxModule m = PtxModule.parse(in.getFileName().toString().replace(".ptx", ""), Files.readString(in));
        StringBuilder out = new StringBuilder(m.shared());
        for (int i = 2; i < args.length; i++) out.append('\n').append(m.entry(args[i])).append('\n');
        Files.writeString(Path.of(args[1]), out);
    }
}
