// Planted bugs for the sanitizer teeth (scripts/gpu_sanitize.sh): each must be
// reported, or the sanitizer run proves nothing.
//   planted_race oob   -- a store one element past a cudaMalloc'd buffer (memcheck)
//   planted_race race  -- threads of a block read shared cells other warps write,
//                         with no barrier in between (racecheck)
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

__global__ void store_one_past(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = i;  // planted: i == n is past the end
}

__global__ void shared_write_read(int* out) {
  __shared__ int cells[256];
  int t = threadIdx.x;
  cells[t] = t;                       // each thread writes its cell ...
  out[t] = cells[(t + 32) % 256];     // ... and reads another warp's, no __syncthreads()
}

int main(int argc, char** argv) {
  const int n = 256;
  int* buf = nullptr;
  if (cudaMalloc(&buf, n * sizeof(int)) != cudaSuccess) return 2;
  if (argc > 1 && !strcmp(argv[1], "oob")) {
    store_one_past<<<2, 256>>>(buf, n);
  } else if (argc > 1 && !strcmp(argv[1], "race")) {
    shared_write_read<<<1, 256>>>(buf);
  } else {
    fprintf(stderr, "usage: planted_race oob|race\n");
    return 2;
  }
  cudaError_t err = cudaDeviceSynchronize();
  printf("%s: %s\n", argv[1], cudaGetErrorString(err));
  cudaFree(buf);
  return 0;
}
