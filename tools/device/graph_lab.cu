// Graph lab: what one more kernel costs in a decode step. Times chains of K dependent launches (each kernel after
// the previous on one stream), captured as one CUDA graph and replayed (as the runtime replays decode steps), and
// the same launched one by one, for kernels of growing size: an empty kernel (1 block), a "small op" (132 blocks
// of 256 threads touching 16 KB: an rmsnorm- or rope-sized launch) and a 2048-block launch of 64 threads (a GEMV
// grid without its loads). Prints microseconds a kernel. Built and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/graph_lab tools/device/graph_lab.cu && /tmp/graph_lab
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

__global__ void empty_kernel() {}

// every thread reads one float and writes it back plus one: a launch whose blocks all do a little memory work
__global__ void touch_kernel(float* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1.f;
}

struct Shape { const char* name; int blocks, threads, elems; };

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
    float* buf;
    CK(cudaMalloc(&buf, 64 << 20));
    CK(cudaMemset(buf, 0, 64 << 20));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    Shape shapes[] = {{"empty, 1 block of 32", 1, 32, 0}, {"small op, 132 x 256 threads, 16 KB", 132, 256, 4096},
                      {"GEMV-sized grid, 2048 x 64 threads, 512 KB", 2048, 64, 131072}};
    const int K = 300;   // about the kernels of an 8B decode step
    printf("| kernel | us a kernel, graph of %d | us a kernel, one by one |\n|---|---|---|\n", K);
    for (const Shape& sh : shapes) {
        auto issue = [&]() {
            for (int k = 0; k < K; k++) {
                if (sh.elems == 0) empty_kernel<<<sh.blocks, sh.threads, 0, s>>>();
                else touch_kernel<<<sh.blocks, sh.threads, 0, s>>>(buf + (size_t) (k % 8) * sh.elems, sh.elems);
            }
        };
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        issue();
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        float bestGraph = 1e30f, bestEager = 1e30f;
        for (int rep = 0; rep < 20; rep++) {
            CK(cudaEventRecord(e0, s));
            CK(cudaGraphLaunch(ge, s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (rep > 2 && ms < bestGraph) bestGraph = ms;
            CK(cudaEventRecord(e0, s));
            issue();
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (rep > 2 && ms < bestEager) bestEager = ms;
        }
        printf("| %s | %.2f | %.2f |\n", sh.name, bestGraph * 1e3f / K, bestEager * 1e3f / K);
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }
    return 0;
}
