/* The kernel's cost of a checkpoint's page writes by run length: 200,000 pages of 4 KiB written
 * into a cached 64 MiB file (f.bin, in the current directory), RUN consecutive pages a call at
 * random run-aligned places, an fdatasync every SYNC pages (300 unless given; 0: only at the
 * end); prints the process's CPU time (user + system) and the wall time a page. MODE 0 writes
 * with pwritev, 1 with O_DIRECT, past the page cache (what a buffer pool of the engine's own
 * would do), 2 by copying into a shared writable mapping of the file (as MDB_WRITEMAP). A
 * merge writes its leaves one call per run of consecutive page ids (`WritePages::spill_filled`),
 * and where free space is single pages its runs are one page long (docs/design/performance.md,
 * "A checkpoint's page writes are single pages" and "Random writes rewrite leaves").
 *
 *   gcc -O2 -o /tmp/larch-page-runs experiments/write-path/page_runs.c && /tmp/larch-page-runs RUN [MODE [SYNC]]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: page_runs RUN (1..64) [MODE 0|1|2 [SYNC]]\n"); return 2; }
  int run = atoi(argv[1]);          /* pages per pwritev, consecutive */
  if (run < 1 || run > 64) { fprintf(stderr, "RUN must be 1..64\n"); return 2; }
  int mode = argc > 2 ? atoi(argv[2]) : 0;
  int direct = mode == 1, map = mode == 2;
  long sync_every = argc > 3 ? atol(argv[3]) : 300;
  long pages = 16384;                /* 64 MiB file */
  int fd = open("f.bin", O_RDWR | O_CREAT, 0644);
  ftruncate(fd, pages * 4096);
  char *buf = aligned_alloc(4096, 4096 * 64); memset(buf, 7, 4096 * 64);
  for (long p = 0; p < pages; p += 64) pwrite(fd, buf, 4096 * 64, p * 4096);
  fdatasync(fd);
  if (direct) {
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    fd = open("f.bin", O_RDWR | O_DIRECT);
    if (fd < 0) { perror("open O_DIRECT"); return 1; }
  }
  char *m = NULL;
  if (map) {
    m = mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    volatile char x = 0;
    for (long p = 0; p < pages; p++) x += m[p * 4096]; /* mapped, as the engine's tree is */
  }
  struct rusage a, b; getrusage(RUSAGE_SELF, &a);
  struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  long total = 200000, done = 0, since = 0; srand(1);
  struct iovec iov[64]; for (int i = 0; i < 64; i++) { iov[i].iov_base = buf + i * 4096; iov[i].iov_len = 4096; }
  while (done < total) {
    long p = (rand() % (pages / run)) * run;
    if (map) memcpy(m + p * 4096, buf, (size_t)run * 4096);
    else if (pwritev(fd, iov, run, p * 4096) != (ssize_t)run * 4096) { perror("pwritev"); return 1; }
    done += run; since += run;
    if (sync_every > 0 && since >= sync_every) { fdatasync(fd); since = 0; }
  }
  fdatasync(fd);
  clock_gettime(CLOCK_MONOTONIC, &t1); getrusage(RUSAGE_SELF, &b);
  close(fd); unlink("f.bin");
  double cpu = (b.ru_utime.tv_sec - a.ru_utime.tv_sec) + (b.ru_stime.tv_sec - a.ru_stime.tv_sec) + ((b.ru_utime.tv_usec - a.ru_utime.tv_usec) + (b.ru_stime.tv_usec - a.ru_stime.tv_usec)) / 1e6;
  double wall = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("run %2d pages%s: %.2f us CPU a page, %.2f us wall a page\n", run, direct ? ", O_DIRECT" : map ? ", mapped" : "", cpu * 1e6 / done, wall * 1e6 / done);
  return 0;
}
