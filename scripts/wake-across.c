/* How long a cross-CPU wake-up takes to reach a SCHED_FIFO 90 thread on CPU 0, by what CPU 0 does
 * while it waits: "none" (it idles: on a kernel without a cpuidle driver, it halts), "spin" (a
 * SCHED_IDLE thread spins there reading the clock, as punctual's idle pollers do) or "yield" (the
 * same with sched_yield in each turn). A SCHED_FIFO 91 thread on CPU 1 wakes it with a futex every
 * 1 ms, 5,000 times; the latency is from the waker's clock read before the wake-up to the woken
 * thread's first read. Prints percentiles and the count over 10 us and 100 us. Build and run (as
 * root): gcc -O2 -pthread -o /tmp/wake-across scripts/wake-across.c && for m in none spin yield;
 * do /tmp/wake-across $m; done (docs/benchmarks.md, "Idle that halts"). */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static _Atomic int word; static _Atomic unsigned long long sent; static int mode; static volatile int stop;
static unsigned long long now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ULL+t.tv_nsec;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void fifo(int p){struct sched_param sp={.sched_priority=p};pthread_setschedparam(pthread_self(),SCHED_FIFO,&sp);}
#define N 5000
static unsigned long long lat[N];
static void *waiter(void*a){pin(0);fifo(90);for(int i=0;i<N;i++){while(atomic_load(&word)==0)syscall(SYS_futex,&word,FUTEX_WAIT_PRIVATE,0,0,0,0);unsigned long long t=now();lat[i]=t-atomic_load(&sent);atomic_store(&word,0);}stop=1;return 0;}
static void *bg(void*a){pin(0);struct sched_param sp={0};pthread_setschedparam(pthread_self(),SCHED_IDLE,&sp);unsigned long long x=0;while(!stop){x+=now();if(mode==2)sched_yield();}return (void*)x;}
static int cmp(const void*a,const void*b){unsigned long long x=*(unsigned long long*)a,y=*(unsigned long long*)b;return x<y?-1:x>y;}
int main(int c,char**v){mode=!strcmp(v[1],"spin")?1:!strcmp(v[1],"yield")?2:0;pthread_t w,b;pthread_create(&w,0,waiter,0);if(mode)pthread_create(&b,0,bg,0);
pin(1);fifo(91);usleep(100000);
for(int i=0;i<N;i++){unsigned long long t=now()+1000000;while(now()<t || atomic_load(&word));atomic_store(&sent,now());atomic_store(&word,1);syscall(SYS_futex,&word,FUTEX_WAKE_PRIVATE,1,0,0,0);}
pthread_join(w,0);stop=1;if(mode)pthread_join(b,0);qsort(lat,N,sizeof lat[0],cmp);
int over10=0,over100=0;for(int i=0;i<N;i++){over10+=lat[i]>10000;over100+=lat[i]>100000;}
printf("%-5s p50 %6.2f us p99 %7.2f us p99.9 %8.2f us max %8.2f us  >10us %d  >100us %d\n",v[1],lat[N/2]/1e3,lat[N*99/100]/1e3,lat[N*999/1000]/1e3,lat[N-1]/1e3,over10,over100);}
