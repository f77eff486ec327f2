package dev.v100.converter.fix;

import dev.v100.converter.tensor.ColumnMappedTensor;
import dev.v100.converter.tensor.RowMappedTensor;
import dev.v100.converter.tensor.TensorData;

/**
 * llama.cpp stores the q and k rows of llama-arch models (llama, granite, mistral) interleaved for
 * its "normal" RoPE: per head, HF rows viewed as [2, headDim/2] are transposed to [headDim/2, 2]
 * (convert_hf_to_gguf.py, LlamaModel.permute). The bundle uses HF's order (neox RoPE), so the
 * converter undoes it. Whole rows move, so this is exact for every storage type.
 */
public final class RopePermute {
    private RopePermute() {}

    /** GGUF row holding HF row {@code hfRow}: within a head, (s, j) -> 2j + s. */
    public static long ggufRowOfHfRow(long hfRow, long headDim) {
        long half = headDim / 2;
        long head = hfRow / headDim, r = hfRow % headDim;
        long s = r / half, j = r % half;
        return head * headDim + 2 * j + s;
    }

    /** HF row held by GGUF row {@code ggufRow}: the inverse of {@link #ggufRowOfHfRow}. */
    public static long hfRowOfGgufRow(long ggufRow, long headDim) {
        long half = headDim / 2;
        long head = ggufRow / headDim, r = ggufRow % headDim;
        long j = r / 2, s = r % 2;
        return head * headDim + s * half + j;
    }

    /** q/k weight [nHeads*headDim, in] in llama.cpp order -> HF order. */
    public static TensorData undoLlamaPermute(TensorData gguf, long headDim) {
        check(gguf.shape()[0], headDim);
        return new RowMappedTensor(gguf, row -> ggufRowOfHfRow(row, headDim));
    }

    /** q/k weight in HF order -> llama.cpp order (the converter never needs it; tests do). */
    public static TensorData applyLlamaPermute(TensorData hf, long headDim) {
        check(hf.shape()[0], headDim);
        return new RowMappedTensor(hf, row -> hfRowOfGgufRow(row, headDim));
    }

    /** q/k bias [nHeads*headDim] in llama.cpp order -> HF order (elements move, not rows). */
    public static TensorData undoLlamaPermuteBias(TensorData gguf, long headDim) {
        check(gguf.cols(), headDim);
        return new ColumnMappedTensor(gguf, col -> ggufRowOfHfRow(col, headDim));
    }

    private static void check(long rows, long headDim) {
        if (headDim % 2 != 0 || rows % headDim != 0) {
            throw new IllegalArgumentException("RoPE permute needs an even head dim dividing " + rows + " rows, got " + headDim);
        }
    }
}
