/* The kernel's UDP send path with and without a probe before each send, for
 * scripts/bench-send-prime.sh: N datagrams of 200 bytes to 127.0.0.1:PORT, 500 us apart, from
 * SCHED_FIFO 90 on CPU 1 with memory locked (sleep to 100 us before each instant, then spin).
 * With PRIME_US > 0, a send with MSG_PROBE (the kernel stops it after the route and sends nothing)
 * is made PRIME_US before each instant. Software transmit stamps are on; prints one line a send:
 * the ns from the clock read before the send call to its kernel stamp. "sendto" leaves the socket
 * unconnected (as punctual's --udp-to). "warm" makes the prime a whole send of 64 bytes from a
 * loopback socket to itself, read back at once (tried in punctual on 2026-12-01, not kept:
 * docs/benchmarks.md, "A whole send through the loopback before each send"). "cork" makes the
 * prime the datagram itself, sent with MSG_MORE (the kernel builds it and holds it), and the send
 * a setsockopt turning UDP_CORK off, which pushes it (punctual's prime since 2026-12-01:
 * docs/benchmarks.md, "The datagram built before its instant"). */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
/* After <time.h>: struct scm_timestamping holds timespecs. */
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>

#define MSG_PROBE 0x10 /* glibc calls the bit MSG_PROXY */

static unsigned long long ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000ULL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PORT N PRIME_US [sendto] [warm|cork]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[2]), prime_us = atoi(argv[3]);
    int unconnected = 0, warm = 0, cork = 0;
    for (int i = 4; i < argc; i++) {
        unconnected |= strcmp(argv[i], "sendto") == 0;
        warm |= strcmp(argv[i], "warm") == 0;
        cork |= strcmp(argv[i], "cork") == 0;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(0x7f000001);
    mlockall(MCL_CURRENT | MCL_FUTURE);
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(1, &s);
    struct sched_param p = {.sched_priority = 90};
    if (sched_setaffinity(0, sizeof s, &s) || sched_setscheduler(0, SCHED_FIFO, &p)) {
        perror("CPU 1 at SCHED_FIFO 90");
        return 1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (!unconnected && connect(fd, (void *)&a, sizeof a)) {
        perror("connect");
        return 1;
    }
    struct sockaddr_in wa = {.sin_family = AF_INET};
    wa.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t wl = sizeof wa;
    int w = socket(AF_INET, SOCK_DGRAM, 0);
    if (warm && (bind(w, (void *)&wa, sizeof wa) || getsockname(w, (void *)&wa, &wl) ||
                 connect(w, (void *)&wa, sizeof wa))) {
        perror("the warm-up socket");
        return 1;
    }
    char junk[64] = {0};
    int on = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY;
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &on, sizeof on);
    char pkt[200];
    memset(pkt, 1, sizeof pkt);
    unsigned long long *path = calloc(n, 8);
    unsigned long long start = ns(CLOCK_MONOTONIC) + 10000000ULL;
    for (int k = 0; k < n; k++) {
        unsigned long long t = start + k * 500000ULL;
        unsigned long long pre = t - 100000;
        struct timespec ts = {pre / 1000000000, pre % 1000000000};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, 0);
        if (prime_us > 0) {
            while (ns(CLOCK_MONOTONIC) < t - prime_us * 1000ULL)
                ;
            if (cork) {
                sendto(fd, pkt, sizeof pkt, MSG_MORE, unconnected ? (void *)&a : 0, unconnected ? sizeof a : 0);
            } else if (warm) {
                send(w, junk, sizeof junk, 0);
                while (recv(w, junk, sizeof junk, MSG_DONTWAIT) > 0)
                    ;
            } else {
                sendto(fd, 0, 0, MSG_PROBE, unconnected ? (void *)&a : 0, unconnected ? sizeof a : 0);
            }
        }
        while (ns(CLOCK_MONOTONIC) < t)
            ;
        unsigned long long before = ns(CLOCK_REALTIME);
        if (cork && prime_us > 0) {
            int off = 0;
            setsockopt(fd, IPPROTO_UDP, UDP_CORK, &off, sizeof off);
        } else {
            sendto(fd, pkt, sizeof pkt, 0, unconnected ? (void *)&a : 0, unconnected ? sizeof a : 0);
        }
        char c[256], d[16];
        struct iovec io = {d, sizeof d};
        struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = c, .msg_controllen = sizeof c};
        for (int tries = 0; tries < 1000; tries++) {
            if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
                continue;
            for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
                if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SO_TIMESTAMPING) {
                    struct scm_timestamping *st = (void *)CMSG_DATA(h);
                    path[k] = st->ts[0].tv_sec * 1000000000ULL + st->ts[0].tv_nsec - before;
                }
            break;
        }
    }
    for (int k = 0; k < n; k++)
        printf("%llu\n", path[k]);
    return 0;
}
