/*
 * threadpool.c - persistent workers with a cheap fork/join barrier.
 *
 * lc_threadpool_run() publishes (fn, arg), bumps a generation counter and runs part 0 itself;
 * workers waiting for a new generation see it, run their part and count down `pending`; the
 * caller waits for pending == 0.  Both waits spin briefly (a decode step issues a few hundred
 * jobs of tens of microseconds each, so the next job usually comes quickly) and then sleep on a
 * condition variable, so idle workers do not burn a core that someone else could use.
 *
 * Lost wake-ups are avoided the Dekker way: a sleeper announces itself (n_sleeping++, seq_cst)
 * and re-checks the condition under the mutex before waiting; a waker changes the condition
 * (seq_cst) and then looks at n_sleeping, taking the mutex to broadcast only when someone sleeps.
 */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/*
 * How long a waiting thread spins before it sleeps: long enough to catch the next job of a
 * decode step (a few hundred per token, tens of microseconds apart), short enough that an idle
 * pool leaves the CPUs to others.  Measured with the clock, because `pause` takes from ~10 to
 * ~140 cycles depending on the CPU.
 */
#define SPIN_NS 50000
#define SPIN_CHECK 64 /* pause instructions between clock reads */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spin until done(p) or SPIN_NS elapsed; returns done(p). */
static int spin_until(int (*done)(struct lc_threadpool *, unsigned), struct lc_threadpool *tp,
                      unsigned arg)
{
    const int64_t t_end = now_ns() + SPIN_NS;
    for (;;) {
        for (int i = 0; i < SPIN_CHECK; i++) {
            if (done(tp, arg))
                return 1;
            cpu_relax();
        }
        if (now_ns() >= t_end)
            return done(tp, arg);
    }
}

struct worker {
    struct lc_threadpool *tp;
    int ith;
    pthread_t thread;
};

struct lc_threadpool {
    atomic_int refs;
    atomic_int running; /* a job is being run (lc_threadpool_run is not re-entrant) */
    int n_threads;
    struct worker *workers; /* n_threads - 1 of them */

    lc_task_fn fn; /* the current job, written before generation is bumped */
    void *arg;
    atomic_uint generation;
    atomic_int pending; /* workers still running the current job */
    atomic_int stop;

    pthread_mutex_t mutex;
    pthread_cond_t work_cond; /* workers sleep here for a new generation */
    pthread_cond_t done_cond; /* the caller sleeps here for pending == 0 */
    atomic_int n_sleeping_workers;
    atomic_int caller_sleeping;
};

static int new_generation(struct lc_threadpool *tp, unsigned seen)
{
    return atomic_load(&tp->generation) != seen;
}

static int all_done(struct lc_threadpool *tp, unsigned unused)
{
    (void)unused;
    return atomic_load(&tp->pending) == 0;
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct lc_threadpool *tp = w->tp;
    unsigned seen = 0;
    for (;;) {
        unsigned gen = seen;
        if (spin_until(new_generation, tp, seen))
            gen = atomic_load(&tp->generation);
        if (gen == seen) {
            pthread_mutex_lock(&tp->mutex);
            atomic_fetch_add(&tp->n_sleeping_workers, 1);
            while ((gen = atomic_load(&tp->generation)) == seen)
                pthread_cond_wait(&tp->work_cond, &tp->mutex);
            atomic_fetch_sub(&tp->n_sleeping_workers, 1);
            pthread_mutex_unlock(&tp->mutex);
        }
        seen = gen;
        if (atomic_load(&tp->stop))
            return NULL;
        tp->fn(tp->arg, w->ith, tp->n_threads);
        if (atomic_fetch_sub(&tp->pending, 1) == 1 && atomic_load(&tp->caller_sleeping)) {
            pthread_mutex_lock(&tp->mutex);
            pthread_cond_signal(&tp->done_cond);
            pthread_mutex_unlock(&tp->mutex);
        }
    }
}

/* Publish a new generation and wake sleeping workers. */
static void kick(struct lc_threadpool *tp)
{
    atomic_fetch_add(&tp->generation, 1);
    if (atomic_load(&tp->n_sleeping_workers) > 0) {
        pthread_mutex_lock(&tp->mutex);
        pthread_cond_broadcast(&tp->work_cond);
        pthread_mutex_unlock(&tp->mutex);
    }
}

struct lc_threadpool *lc_threadpool_new(int n_threads, char **err)
{
    if (err)
        *err = NULL;
    if (n_threads < 1 || n_threads > 1024) {
        if (err) {
            char buf[96];
            snprintf(buf, sizeof buf, "thread pool: n_threads %d out of range [1, 1024]",
                     n_threads);
            *err = strdup(buf);
        }
        return NULL;
    }
    struct lc_threadpool *tp = calloc(1, sizeof(*tp));
    if (!tp) {
        if (err)
            *err = strdup("thread pool: out of memory");
        return NULL;
    }
    atomic_init(&tp->refs, 1);
    tp->n_threads = n_threads;
    pthread_mutex_init(&tp->mutex, NULL);
    pthread_cond_init(&tp->work_cond, NULL);
    pthread_cond_init(&tp->done_cond, NULL);
    if (n_threads > 1) {
        tp->workers = calloc((size_t)n_threads - 1, sizeof(*tp->workers));
        if (!tp->workers) {
            if (err)
                *err = strdup("thread pool: out of memory");
            lc_threadpool_free(tp);
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker *w = &tp->workers[i - 1];
        w->tp = tp;
        w->ith = i;
        const int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            if (err) {
                char buf[128];
                snprintf(buf, sizeof buf, "thread pool: cannot create thread %d of %d: %s", i,
                         n_threads, strerror(rc));
                *err = strdup(buf);
            }
            tp->n_threads = i; /* join only those that exist */
            lc_threadpool_free(tp);
            return NULL;
        }
    }
    return tp;
}

struct lc_threadpool *lc_threadpool_ref(struct lc_threadpool *tp)
{
    atomic_fetch_add(&tp->refs, 1);
    return tp;
}

void lc_threadpool_free(struct lc_threadpool *tp)
{
    if (!tp || atomic_fetch_sub(&tp->refs, 1) > 1)
        return;
    if (tp->workers) {
        atomic_store(&tp->stop, 1);
        kick(tp);
        for (int i = 1; i < tp->n_threads; i++)
            pthread_join(tp->workers[i - 1].thread, NULL);
        free(tp->workers);
    }
    pthread_cond_destroy(&tp->work_cond);
    pthread_cond_destroy(&tp->done_cond);
    pthread_mutex_destroy(&tp->mutex);
    free(tp);
}

int lc_threadpool_n_threads(const struct lc_threadpool *tp)
{
    return tp->n_threads;
}

void lc_threadpool_run(struct lc_threadpool *tp, lc_task_fn fn, void *arg)
{
    /* one job at a time: a pool shared by two owners (lc_threadpool_ref) must not be driven by
     * two threads at once, which would mix their jobs silently; stop loudly instead */
    if (atomic_exchange(&tp->running, 1)) {
        fputs("llamachat: internal error: two threads ran jobs on one thread pool at once\n",
              stderr);
        abort();
    }
    if (tp->n_threads == 1) {
        fn(arg, 0, 1);
        atomic_store(&tp->running, 0);
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    atomic_store(&tp->pending, tp->n_threads - 1);
    kick(tp); /* seq_cst: fn/arg/pending are visible to whoever sees the new generation */
    fn(arg, 0, tp->n_threads);
    if (!spin_until(all_done, tp, 0)) {
        pthread_mutex_lock(&tp->mutex);
        atomic_store(&tp->caller_sleeping, 1);
        while (atomic_load(&tp->pending) > 0)
            pthread_cond_wait(&tp->done_cond, &tp->mutex);
        atomic_store(&tp->caller_sleeping, 0);
        pthread_mutex_unlock(&tp->mutex);
    }
    atomic_store(&tp->running, 0);
}

int lc_n_cpus(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)(n > 1024 ? 1024 : n) : 1;
}
