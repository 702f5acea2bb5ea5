/* test-threadpool.c - every job runs once per thread, ranges partition the work, errors. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "llm/threadpool.h"
#include "testutil.h"

enum { N = 1000 };

struct job {
    int round;
    int hits[N];        /* each index written by exactly one thread per round */
    atomic_int calls;
    atomic_int seen[64];
    int bad_nth;
    int nth_expected;
};

static void task(void *p, int ith, int nth)
{
    struct job *j = p;
    if (nth != j->nth_expected)
        j->bad_nth = 1;
    atomic_fetch_add(&j->calls, 1);
    atomic_fetch_add(&j->seen[ith], 1);
    int lo, hi;
    lc_split_range(N, ith, nth, &lo, &hi);
    for (int i = lo; i < hi; i++)
        j->hits[i] += j->round; /* races would show up as wrong sums (and under TSan) */
}

/* two drivers of one pool (the reference-counted sharing of lc_threadpool_ref gone wrong) */
static void slow_task(void *p, int ith, int nth)
{
    (void)p;
    (void)ith;
    (void)nth;
    const struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void *second_driver(void *p)
{
    lc_threadpool_run(p, slow_task, NULL);
    return NULL;
}

/* In a child: a job on the pool from another thread while one runs must stop the process with
 * SIGABRT and the message; the parent checks both. */
static void test_two_drivers(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        alarm(20); /* without the guard the two jobs could wait for each other: SIGALRM */
        struct lc_threadpool *tp = lc_threadpool_new(2, NULL);
        struct lc_threadpool *shared = tp ? lc_threadpool_ref(tp) : NULL;
        pthread_t t;
        if (!shared || pthread_create(&t, NULL, second_driver, shared) != 0)
            _exit(3);
        const struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL); /* the other thread's job is running */
        lc_threadpool_run(tp, slow_task, NULL);
        pthread_join(t, NULL);
        _exit(0); /* not reached when the guard works */
    }
    close(fds[1]);
    char buf[512] = "";
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = 0;
    close(fds[0]);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "two drivers: not aborted (status %d)", st);
    CHECK(strstr(buf, "internal error: two threads ran jobs on one thread pool at once") != NULL,
          "two drivers: message [%s]", buf);
}

int main(void)
{
    char *err = NULL;
    CHECK(lc_threadpool_new(0, &err) == NULL && err && strstr(err, "n_threads 0"), "n=0: %s",
          err ? err : "(none)");
    free(err);
    CHECK(lc_n_cpus() >= 1, "n_cpus");
    for (int nt = 1; nt <= 5; nt++) {
        struct lc_threadpool *tp = lc_threadpool_new(nt, &err);
        CHECK(tp != NULL, "new(%d): %s", nt, err ? err : "");
        if (!tp)
            continue;
        CHECK(lc_threadpool_n_threads(tp) == nt, "n_threads");
        struct job *j = calloc(1, sizeof(*j));
        j->nth_expected = nt;
        const int rounds = 3000;
        long want = 0;
        for (int r = 1; r <= rounds; r++) {
            j->round = r;
            want += r;
            lc_threadpool_run(tp, task, j);
        }
        CHECK(atomic_load(&j->calls) == rounds * nt, "calls %d", atomic_load(&j->calls));
        for (int t = 0; t < nt; t++)
            CHECK(atomic_load(&j->seen[t]) == rounds, "thread %d ran %d", t,
                  atomic_load(&j->seen[t]));
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += j->hits[i] != want;
        CHECK(!bad, "%d threads: %d indices wrong", nt, bad);
        CHECK(!j->bad_nth, "nth");
        free(j);
        lc_threadpool_free(tp);
    }
    /* ranges: cover [0, n) in order without overlap, sizes differ by at most 1 */
    for (int n = 0; n < 40; n++)
        for (int nth = 1; nth < 9; nth++) {
            int prev = 0;
            for (int ith = 0; ith < nth; ith++) {
                int lo, hi;
                lc_split_range(n, ith, nth, &lo, &hi);
                CHECK(lo == prev && hi >= lo && hi - lo <= n / nth + 1, "split %d %d %d", n, ith, nth);
                prev = hi;
            }
            CHECK(prev == n, "split end %d %d", n, nth);
        }
    test_two_drivers();
    return tu_finish("test-threadpool");
}
