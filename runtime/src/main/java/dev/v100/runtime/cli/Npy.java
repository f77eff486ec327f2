package dev.v100.runtime.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Writes a little-endian float32 .npy (format 1.0). Private stand-in until
 * dev.v100.formats.npy.NpyWriter (branch gguf) is on main; replace the call then.
 */
final class Npy {
    private Npy() {}

    /** Writes data as a C-order float32 array of the given shape, atomically (temp file + rename). */
    static void writeF32(Path out, float[] data, long... shape) throws IOException {
        long n = 1;
        for (long d : shape) n *= d;
        if (n != data.length) throw new IllegalArgumentException(data.length + " values for shape " + java.util.Arrays.toString(shape));
        StringBuilder dims = new StringBuilder();
        for (long d : shape) dims.append(d).append(shape.length == 1 ? "," : ", ");
        String dimStr = shape.length == 1 ? dims.toString() : dims.substring(0, dims.length() - 2);
        String dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dimStr + "), }";
        int headerLen = 10 + dict.length() + 1;
        int pad = (64 - headerLen % 64) % 64;
        String header = dict + " ".repeat(pad) + "\n";
        Path tmp = out.resolveSibling("." + out.getFileName() + ".tmp");
        try (OutputStream os = Files.newOutputStream(tmp)) {
            ByteBuffer pre = ByteBuffer.allocate(10).order(ByteOrder.LITTLE_ENDIAN);
            pre.put((byte) 0x93).put("NUMPY".getBytes(StandardCharsets.US_ASCII)).put((byte) 1).put((byte) 0).putShort((short) header.length());
            os.write(pre.array());
            os.write(header.getBytes(StandardCharsets.US_ASCII));
            ByteBuffer body = ByteBuffer.allocate(4 * data.length).order(ByteOrder.LITTLE_ENDIAN);
            body.asFloatBuffer().put(data);
            os.write(body.array());
        }
        Files.move(tmp, out, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
}
