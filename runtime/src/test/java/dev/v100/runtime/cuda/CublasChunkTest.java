package dev.v100.runtime.cuda;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The row chunks cuBLAS multiplies a dequantized weight in (no GPU needed: the arithmetic of the split). */
class CublasChunkTest {
    @ParameterizedTest(name = "[{0} x {1}]")
    @CsvSource({"17408, 5120", "10240, 5120", "5120, 17408", "14336, 4096", "4096, 14336", "248320, 5120", "128256, 4096", "48, 5120",
            "1000, 100000", "7, 3000000"})
    void chunksFitTheScratchAndStayAligned(long rows, long k) {
        long chunk = CudaBackend.cublasChunkRows(rows, k);
        assertTrue(chunk >= 1 && chunk <= rows, "chunk " + chunk);
        assertTrue(2 * chunk * k <= CudaBackend.DEQUANT_SCRATCH_BYTES || chunk == 1, "fits the dequant scratch: " + chunk);
        if (chunk < rows && CudaBackend.DEQUANT_SCRATCH_BYTES / (2 * k) >= CudaBackend.CUBLAS_CHUNK_ALIGN_ROWS) {
            assertEquals(0, chunk % CudaBackend.CUBLAS_CHUNK_ALIGN_ROWS, "a chunk short of the whole weight is whole tiles: " + chunk);
            assertTrue(chunk + CudaBackend.CUBLAS_CHUNK_ALIGN_ROWS > CudaBackend.DEQUANT_SCRATCH_BYTES / (2 * k), "no smaller than it must be: " + chunk);
        }
    }

    @ParameterizedTest(name = "[{0} x {1}] -> {2}")
    @CsvSource({"17408, 5120, 6528", "5120, 17408, 1920", "6144, 5120, 6144", "14336, 4096, 8192", "4096, 14336, 2304"})
    void theChunksOfTheBenchShapes(long rows, long k, long expected) {
        assertEquals(expected, CudaBackend.cublasChunkRows(rows, k));
    }
}
