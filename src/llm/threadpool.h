/*
 * threadpool.h - a persistent pool of worker threads.
 *
 * Workers are created once; lc_threadpool_run() hands one job to every thread (the caller is
 * thread 0) and returns when all have finished it.  Jobs partition their work by (ith, nth).
 */
#ifndef LC_THREADPOOL_H
#define LC_THREADPOOL_H

struct lc_threadpool;

typedef void (*lc_task_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (the caller counts as one).  NULL with a malloc'd *err on failure.  The pool
 * starts with one reference. */
struct lc_threadpool *lc_threadpool_new(int n_threads, char **err);
/* Another reference to tp (returned), for a second owner that never runs jobs on it at the same
 * time as the first (e.g. a draft model's context beside its target's, driven by one thread). */
struct lc_threadpool *lc_threadpool_ref(struct lc_threadpool *tp);
/* Drop a reference; the last one stops and joins the workers and frees the pool.  NULL: no-op. */
void lc_threadpool_free(struct lc_threadpool *tp);
int lc_threadpool_n_threads(const struct lc_threadpool *tp);
/* Run fn(arg, ith, nth) for ith in [0, nth) concurrently; returns when all calls returned. */
void lc_threadpool_run(struct lc_threadpool *tp, lc_task_fn fn, void *arg);

/* Split [0, n) into nth nearly-equal ranges; range ith is [*lo, *hi). */
static inline void lc_split_range(int n, int ith, int nth, int *lo, int *hi)
{
    int per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

/* Number of online CPUs (>= 1). */
int lc_n_cpus(void);

#endif
