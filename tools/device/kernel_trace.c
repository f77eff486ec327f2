// Kernel timings inside CUDA graphs, for a machine without Nsight Systems (the device image has ncu only).
// A CUPTI injection library: the CUDA driver loads it into any process started with CUDA_INJECTION64_PATH
// pointing at it and calls InitializeInjection() at the process's first CUDA call; it records every kernel
// (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: GPU timestamps, kernels are not serialized), every driver API call
// (host timestamps on the same clock) and every memory copy, and at exit writes them to $KTRACE_OUT, a line each:
//   K graph-id node-id start end name      (graph id 0: launched one by one)
//   D start end call-name thread-id
//   M start end bytes copy-kind
// (tab-separated, times in ns). tools/device/kernel_trace.py sums the kernels per graph replay (what a decode
// step's kernels cost where the runtime runs them: bench's own profile times each kernel alone, launched one by
// one) and shows what the host did while the GPU waited.
//
// Build (on the device, CUDA 13 toolkit; tools/device/run.sh's ktrace step does it):
//   gcc -O2 -shared -fPIC -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include
//       -o /tmp/libktrace.so tools/device/kernel_trace.c -L/usr/local/cuda/lib64
//       -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti
// Use: CUDA_INJECTION64_PATH=/tmp/libktrace.so KTRACE_OUT=/tmp/k.tsv <command>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#define BUF_BYTES (8u << 20)

static FILE* out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long dropped;

#define CHECK(call)                                                                                        \
    do {                                                                                                   \
        CUptiResult r_ = (call);                                                                           \
        if (r_ != CUPTI_SUCCESS) {                                                                         \
            const char* s_ = "?";                                                                          \
            cuptiGetResultString(r_, &s_);                                                                 \
            fprintf(stderr, "kernel_trace: %s failed: %s\n", #call, s_);                                   \
            return r_;                                                                                     \
        }                                                                                                  \
    } while (0)

static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
    *buffer = (uint8_t*) aligned_alloc(8, BUF_BYTES);
    *size = *buffer ? BUF_BYTES : 0;
    *maxRecords = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t size, size_t valid) {
    (void) ctx;
    (void) streamId;
    (void) size;
    CUpti_Activity* rec = NULL;
    pthread_mutex_lock(&lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (!out) continue;
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10* k = (const CUpti_ActivityKernel10*) rec;
            fprintf(out, "K\t%u\t%llu\t%llu\t%llu\t%s\n", k->graphId, (unsigned long long) k->graphNodeId,
                    (unsigned long long) k->start, (unsigned long long) k->end, k->name ? k->name : "?");
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            const CUpti_ActivityAPI* a = (const CUpti_ActivityAPI*) rec;
            const char* name = "?";
            cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name);
            fprintf(out, "D\t%llu\t%llu\t%s\t%u\n", (unsigned long long) a->start, (unsigned long long) a->end, name, a->threadId);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6* m = (const CUpti_ActivityMemcpy6*) rec;
            fprintf(out, "M\t%llu\t%llu\t%llu\t%u\n", (unsigned long long) m->start, (unsigned long long) m->end,
                    (unsigned long long) m->bytes, (unsigned) m->copyKind);
        }
    }
    size_t d = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, streamId, &d) == CUPTI_SUCCESS) dropped += d;
    pthread_mutex_unlock(&lock);
    free(buffer);
}

static void finish(void) {
    cuptiActivityFlushAll(1);
    pthread_mutex_lock(&lock);
    if (out) {
        fclose(out);
        out = NULL;
    }
    if (dropped) fprintf(stderr, "kernel_trace: %llu records dropped\n", dropped);
    pthread_mutex_unlock(&lock);
}

int InitializeInjection(void) {
    const char* path = getenv("KTRACE_OUT");
    out = fopen(path ? path : "/tmp/ktrace.tsv", "w");
    if (!out) {
        perror("kernel_trace: KTRACE_OUT");
        return 0;
    }
    CHECK(cuptiActivityRegisterCallbacks(requested, completed));
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    atexit(finish);
    fprintf(stderr, "kernel_trace: recording kernels to %s\n", path ? path : "/tmp/ktrace.tsv");
    return 1;
}
