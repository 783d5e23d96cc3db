/* The smallest ccl program: every rank adds (rank + 1) * {1, 2, 3, 4} into one buffer, in place.
 *
 *   cclrun -np 2 ./allreduce_c        ->  "rank 0 of 2: allreduce ok (3 6 9 12)"
 *
 * Build: see CMakeLists.txt (find_package) or docs/getting-started.md (pkg-config). */
#include <ccl/ccl.h>
#include <stdio.h>

#define N 4

int main(void) {
  cclComm_t comm;
  cclResult_t result = cclCommInitFromEnv(&comm);
  if (result != cclSuccess) {
    fprintf(stderr, "cclCommInitFromEnv: %s\n", cclGetErrorString(result));
    return 1;
  }
  int rank = 0;
  int size = 0;
  cclCommUserRank(comm, &rank);
  cclCommCount(comm, &size);

  float x[N];
  for (int i = 0; i < N; ++i) x[i] = (float)((rank + 1) * (i + 1));
  /* A NULL stream: the call returns when the result is in x. */
  result = cclAllReduce(x, x, N, cclFloat32, cclSum, comm, NULL);
  if (result != cclSuccess) {
    fprintf(stderr, "rank %d: cclAllReduce: %s: %s\n", rank, cclGetErrorString(result),
            cclGetLastError(comm));
    cclCommDestroy(comm);
    return 1;
  }

  /* The sum of (r + 1) over the ranks is size * (size + 1) / 2; small integers are exact. */
  int ok = 1;
  float ranks_sum = (float)(size * (size + 1) / 2);
  for (int i = 0; i < N; ++i) ok = ok && x[i] == ranks_sum * (float)(i + 1);
  printf("rank %d of %d: allreduce %s (%g %g %g %g)\n", rank, size, ok ? "ok" : "WRONG", x[0], x[1],
         x[2], x[3]);
  cclCommDestroy(comm);
  return ok ? 0 : 1;
}
