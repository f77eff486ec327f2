package dev.v100.kernels.cuda;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

import dev.v100.kernels.cuda.PtxCompiler.KernelBuildException;

/**
 * The machine code of each kernel in a cubin: a cubin is an ELF64 file whose section {@code .text.<kernel>} holds that
 * kernel's SASS, 16 bytes an instruction on Volta (sm_70). The kernel build records the count per kernel: a launch that
 * runs as one short wave fetches its code cold on every multiprocessor, so a kernel's code size can cost more than the
 * instructions it executes (docs/BENCHMARKS.md, eighteenth session).
 */
final class CubinText {
    /** Bytes of one sm_70 instruction (Volta encodes every instruction in 128 bits). */
    static final int SM70_INSTRUCTION_BYTES = 16;
    private static final String PREFIX = ".text.";

    private CubinText() {}

    /** Kernel name -> bytes of its {@code .text.<kernel>} section, in section order. */
    static Map<String, Long> sizes(byte[] elf, String what) throws KernelBuildException {
        ByteBuffer b = ByteBuffer.wrap(elf).order(ByteOrder.LITTLE_ENDIAN);
        if (elf.length < 64 || b.getInt(0) != 0x464c457f || elf[4] != 2 || elf[5] != 1) {
            throw new KernelBuildException(what + ": not a little-endian ELF64 cubin");
        }
        long shoff = b.getLong(0x28);
        int shentsize = Short.toUnsignedInt(b.getShort(0x3A)), shnum = Short.toUnsignedInt(b.getShort(0x3C));
        int shstrndx = Short.toUnsignedInt(b.getShort(0x3E));
        if (shentsize < 64 || shstrndx >= shnum || !inside(shoff, (long) shnum * shentsize, elf.length)) {
            throw new KernelBuildException(what + ": its section headers lie outside the file");
        }
        long strOff = b.getLong((int) (shoff + (long) shstrndx * shentsize + 24));
        long strSize = b.getLong((int) (shoff + (long) shstrndx * shentsize + 32));
        if (!inside(strOff, strSize, elf.length)) throw new KernelBuildException(what + ": its section names lie outside the file");
        Map<String, Long> out = new LinkedHashMap<>();
        for (int i = 0; i < shnum; i++) {
            int h = (int) (shoff + (long) i * shentsize);
            long nameOff = Integer.toUnsignedLong(b.getInt(h));
            if (nameOff >= strSize) throw new KernelBuildException(what + ": section " + i + "'s name lies outside the names");
            String name = cString(elf, (int) (strOff + nameOff), (int) (strOff + strSize));
            if (name.startsWith(PREFIX)) out.put(name.substring(PREFIX.length()), b.getLong(h + 32));
        }
        return out;
    }

    /** Whether [offset, offset + length) lies in a file of fileLength bytes (no overflow: both are checked first). */
    private static boolean inside(long offset, long length, long fileLength) {
        return offset >= 0 && length >= 0 && offset <= fileLength && length <= fileLength - offset;
    }

    private static String cString(byte[] a, int from, int limit) {
        int end = from;
        while (end < limit && a[end] != 0) end++;
        return new String(a, from, end - from, StandardCharsets.US_ASCII);
    }
}
