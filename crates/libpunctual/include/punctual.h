/*
 * punctual.h: periodic tasks with punctual's accuracy (KURT's rt_suspend, from user space).
 *
 * Link with -lpunctual (libpunctual.so, installed by `punctual install-lib --prefix DIR`).
 *
 *   punctual_periodic *p = punctual_periodic_new(10000000, 0, 0);   // 10 ms, phase 0
 *   for (;;) {
 *       int64_t lateness_ns; uint64_t missed;
 *       if (punctual_wait_next_period(p, &lateness_ns, &missed) != 0) break;
 *       do_work();
 *   }
 *   punctual_periodic_free(p);
 *
 * Times are nanoseconds on CLOCK_MONOTONIC. One punctual_periodic per thread; not thread-safe.
 */
#ifndef PUNCTUAL_H
#define PUNCTUAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flags for punctual_periodic_new / punctual_periodic_attach. */
#define PUNCTUAL_NO_SPIN  1u  /* standalone only: plain absolute sleep, no spinning to the instant */
#define PUNCTUAL_REALTIME 2u  /* run the calling thread under SCHED_FIFO 80 with memory locked */

typedef struct punctual_periodic punctual_periodic;

/*
 * A task that keeps its own period. Release k is at first + k * period_ns, where first is the next
 * multiple of period_ns (on CLOCK_MONOTONIC) plus phase_ns, at least 1 ms ahead; so processes with
 * one period and different phases never collide. Each wait sleeps until a margin before the release
 * (adapted to the wake-ups seen) and spins to the instant.
 * Returns NULL and sets errno on error: EINVAL (period 0, phase >= period, unknown flags),
 * EPERM (PUNCTUAL_REALTIME refused).
 */
punctual_periodic *punctual_periodic_new(uint64_t period_ns, uint64_t phase_ns, uint32_t flags);

/*
 * A task released by a running `punctual run` plan: a task or events with
 * action = { kind = "wake", channel = "NAME" }. Waits up to 10 s for the channel to appear.
 * The dispatcher wakes the process ahead of each release and the process spins to the instant.
 * Returns NULL and sets errno on error: ENOENT (no such channel), EBUSY (the channel has a client),
 * EPROTO (not a punctual channel of this version), ESHUTDOWN (the plan has ended), EINVAL.
 */
punctual_periodic *punctual_periodic_attach(const char *channel, uint32_t flags);

/*
 * Block until the next release. On return, *lateness_ns is how late the caller runs after the
 * release instant and *missed how many releases were skipped since the previous call because their
 * time had already passed (the work overran). Either pointer may be NULL.
 * Returns 0, or -errno: -EINVAL (p is NULL), -ESHUTDOWN (the plan ended), -EPIPE (the dispatcher is
 * gone).
 */
int punctual_wait_next_period(punctual_periodic *p, int64_t *lateness_ns, uint64_t *missed);

/*
 * The task's statistics (KURT's rtstats) as one JSON series of punctual's result document
 * (schema punctual.result/1, section "series"): count, min, max, mean, percentiles, within,
 * missed_periods, woke_late, histogram, releases, period_ns. Like snprintf: writes at most
 * buflen - 1 bytes and a NUL, and returns the length of the whole JSON text; a return value of
 * buflen or more means the text was cut. Returns -EINVAL if p is NULL (or buf is NULL with
 * buflen > 0).
 */
int punctual_periodic_stats_json(const punctual_periodic *p, char *buf, size_t buflen);

/* Release the task (NULL is allowed). */
void punctual_periodic_free(punctual_periodic *p);

#ifdef __cplusplus
}
#endif

#endif /* PUNCTUAL_H */
