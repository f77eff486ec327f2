// Measures the driver's PTX JIT: loads the given PTX files into one context from THREADS threads (default 1) and
// prints each load's seconds and the total. On the GPU machine, with the PTX put back by tools/device/put-ptx.sh or
// unpacked from .device/kernels-ptx.tar.xz (strip the trailing NUL: tr -d '\000'):
//   gcc -O2 -I/usr/local/cuda/include -o /tmp/jit_probe tools/device/jit_probe.c "$(ldconfig -p | grep -m1 'libcuda.so.1 ' | sed 's/.*=> //')" -lpthread
//   CUDA_CACHE_DISABLE=1 THREADS=9 /tmp/jit_probe ptx/*.ptx
// 2026-12-02 (H200, driver 580.159): the nine modules took 29.8 s from one thread and 20-24 s from 4-16 threads (about
// what the largest, gemv.ptx, takes alone): why CudaDevice loads each kernel at its first launch instead (PtxModule).
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static CUcontext ctx; static char **files; static int nfiles; static int next = 0;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *work(void *arg) {
  cuCtxSetCurrent(ctx);
  for (;;) {
    pthread_mutex_lock(&mu); int i = next++; pthread_mutex_unlock(&mu);
    if (i >= nfiles) return NULL;
    FILE *f = fopen(files[i], "rb");
    if (!f) { printf("  %-28s cannot be read\n", files[i]); continue; }
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char *b = malloc(n + 1); size_t got = fread(b, 1, n, f); b[got] = 0; fclose(f);
    double t0 = now(); CUmodule m; CUresult rc = cuModuleLoadDataEx(&m, b, 0, NULL, NULL); double t1 = now();
    printf("  %-28s %8.3f s rc=%d\n", files[i], t1 - t0, rc); fflush(stdout); free(b);
  }
}
int main(int argc, char **argv) {
  int threads = atoi(getenv("THREADS") ? getenv("THREADS") : "1");
  files = argv + 1; nfiles = argc - 1;
  double t0 = now();
  if (threads < 1 || threads > 64) { fprintf(stderr, "THREADS=%d: 1 to 64\n", threads); return 2; }
  CUdevice d;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx)) { fprintf(stderr, "no usable GPU\n"); return 3; }
  double t1 = now();
  pthread_t th[64];
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, work, NULL);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  printf("THREADS=%d modules=%d init %.3f s, load %.3f s\n", threads, nfiles, t1 - t0, now() - t1);
  return 0;
}
