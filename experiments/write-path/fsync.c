// pwrite of one record + fdatasync (or O_DSYNC), N times, on a log file prepared four ways; see
// docs/design/write-path.md, "The device". gcc -O2 fsync.c && ./a.out MODE BYTES N
// MODE 0: preallocated by writing zeros; 1: appended; 2: preallocated, O_DSYNC; 3: fallocate only.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
// mode: 0 = pwrite+fdatasync over preallocated (zero-filled, synced) file; 1 = appending (extends);
// 2 = O_DSYNC pwrite over preallocated; 3 = fallocate'd but unwritten (unwritten extents)
int main(int argc,char**argv){
  int mode=atoi(argv[1]); int bytes=atoi(argv[2]); int n=atoi(argv[3]);
  const char*path="fsync-test.bin"; unlink(path);
  long total=(long)bytes*n+(1<<20);
  int fd=open(path,O_RDWR|O_CREAT|(mode==2?O_DSYNC:0),0644);
  char*buf=aligned_alloc(4096,bytes<4096?4096:bytes); memset(buf,7,bytes);
  if(mode==0||mode==2){char*z=calloc(1,1<<20);for(long o=0;o<total;o+=1<<20)pwrite(fd,z,1<<20,o);fsync(fd);}
  if(mode==3){fallocate(fd,0,0,total);fsync(fd);}
  double t0=now();
  for(int i=0;i<n;i++){pwrite(fd,buf,bytes,(long)i*bytes); if(mode!=2) fdatasync(fd);}
  double t=now()-t0;
  printf("mode %d bytes %d: %.0f commits/s (%.1f us each)\n",mode,bytes,n/t,t/n*1e6);
  unlink(path);return 0;}
