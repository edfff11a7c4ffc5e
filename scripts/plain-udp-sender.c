/* The floor of a user-space sender, for scripts/bench-traffic-veth.sh (SENDER=plain): N UDP
 * datagrams (an 8-byte sequence number and 56 bytes of 'x', as the script's capture holds) to
 * ADDR:PORT at instants start + i * SPACING_NS, anchored to the start, spinning on CLOCK_MONOTONIC
 * the whole time at SCHED_FIFO 99 with memory locked: no sleep, no timer, no dispatcher. Prints how
 * long the send call took (p50 / p99 / max) and how late each send call began. With a fifth
 * argument "stamps", software transmit stamps are on and read back after each send; with "sendto",
 * the socket is not connected and each send names the address. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <linux/net_tstamp.h>
#include <linux/errqueue.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s ADDR PORT N SPACING_NS [stamps] [sendto]\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[3]);
    int stamps = 0, unconnected = 0;
    for (int i = 5; i < argc; i++) {
        stamps |= strcmp(argv[i], "stamps") == 0;
        unconnected |= strcmp(argv[i], "sendto") == 0;
    }
    long long spacing = atoll(argv[4]);
    struct sched_param p = {.sched_priority = 99};
    if (n <= 0 || spacing <= 0 || sched_setscheduler(0, SCHED_FIFO, &p) || mlockall(MCL_CURRENT | MCL_FUTURE)) {
        perror("plain-udp-sender: setup");
        return 3;
    }
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    /* "sendto": an unconnected socket, the address given with each send, as punctual does. */
    if (s < 0 || (!unconnected && connect(s, (struct sockaddr *)&a, sizeof a))) {
        perror("plain-udp-sender: socket");
        return 3;
    }
    /* "stamps": software transmit stamps on, the error queue drained after each send, as
     * `punctual traffic replay` does. */
    if (stamps) {
        int f = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID |
                SOF_TIMESTAMPING_OPT_TSONLY;
        if (setsockopt(s, SOL_SOCKET, SO_TIMESTAMPING, &f, sizeof f)) {
            perror("plain-udp-sender: SO_TIMESTAMPING");
            return 3;
        }
    }
    char buf[64], ctl[256];
    memset(buf, 'x', sizeof buf);
    long long *took = calloc(n, sizeof *took), *late = calloc(n, sizeof *late);
    long long t0 = now() + 1000000;
    for (long long i = 0; i < n; i++) {
        long long at = t0 + i * spacing, b;
        while ((b = now()) < at)
            ;
        memcpy(buf, &i, sizeof i);
        if (unconnected)
            sendto(s, buf, sizeof buf, 0, (struct sockaddr *)&a, sizeof a);
        else
            send(s, buf, sizeof buf, 0);
        took[i] = now() - b;
        late[i] = b - at;
        while (stamps) {
            struct msghdr m = {.msg_control = ctl, .msg_controllen = sizeof ctl};
            if (recvmsg(s, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
                break;
        }
    }
    qsort(took, n, sizeof *took, cmp);
    qsort(late, n, sizeof *late, cmp);
    printf("plain sender: %d sends; send call p50 %.2f us, p99 %.2f us, max %.1f us; call began late p50 %.2f us, p99 %.2f us, max %.1f us\n",
           n, took[n / 2] / 1e3, took[n * 99 / 100] / 1e3, took[n - 1] / 1e3, late[n / 2] / 1e3,
           late[n * 99 / 100] / 1e3, late[n - 1] / 1e3);
    return 0;
}
