/*
 * A periodic task on libpunctual: the KURT test program (a process that runs once every period and
 * notes how late it ran), written against punctual.h.
 *
 *   gcc -O2 -I crates/libpunctual/include examples/c/periodic.c -L target/release -lpunctual -o periodic
 *   LD_LIBRARY_PATH=target/release ./periodic --period-us 10000 --loops 500
 *   LD_LIBRARY_PATH=target/release ./periodic --attach NAME        # released by `punctual run`
 *
 * It prints one line per 100 releases and, at the end, its statistics as a punctual.result/1 series.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "punctual.h"

int main(int argc, char **argv) {
    uint64_t period_us = 1000, loops = 1000;
    const char *channel = NULL;
    uint32_t flags = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--period-us") && i + 1 < argc) period_us = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--loops") && i + 1 < argc) loops = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--attach") && i + 1 < argc) channel = argv[++i];
        else if (!strcmp(argv[i], "--realtime")) flags |= PUNCTUAL_REALTIME;
        else {
            fprintf(stderr, "usage: %s [--period-us N] [--loops N] [--attach CHANNEL] [--realtime]\n", argv[0]);
            return 2;
        }
    }
    punctual_periodic *p = channel ? punctual_periodic_attach(channel, flags)
                                   : punctual_periodic_new(period_us * 1000, 0, flags);
    if (!p) {
        fprintf(stderr, "periodic: %s\n", strerror(errno));
        return 3;
    }
    uint64_t n = 0, missed_total = 0;
    int64_t worst = 0;
    while (n < loops) {
        int64_t lateness;
        uint64_t missed;
        int rc = punctual_wait_next_period(p, &lateness, &missed);
        if (rc == -ESHUTDOWN) break; /* the plan ended */
        if (rc != 0) {
            fprintf(stderr, "periodic: wait: %s\n", strerror(-rc));
            punctual_periodic_free(p);
            return 3;
        }
        n++;
        missed_total += missed;
        if (lateness > worst) worst = lateness;
        if (n % 100 == 0) fprintf(stderr, "periodic: %llu releases, worst lateness %lld ns\n", (unsigned long long)n, (long long)worst);
    }
    int need = punctual_periodic_stats_json(p, NULL, 0);
    char *buf = malloc((size_t)need + 1);
    if (!buf || punctual_periodic_stats_json(p, buf, (size_t)need + 1) != need) {
        fprintf(stderr, "periodic: stats failed\n");
        return 3;
    }
    printf("releases %llu missed %llu worst_lateness_ns %lld\n%s\n", (unsigned long long)n,
           (unsigned long long)missed_total, (long long)worst, buf);
    free(buf);
    punctual_periodic_free(p);
    return 0;
}
