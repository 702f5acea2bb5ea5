/*
 * test-ring.c - the SPSC ring: boundaries single-threaded, then a producer and a consumer thread
 * moving millions of records through a small ring (so it is full and empty very often); every
 * record must arrive once, in order, with its bytes intact.  tests/test-ring-tsan.sh builds this
 * same file with -fsanitize=thread.  LC_RING_N overrides the record count.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "ring.h"
#include "testutil.h"

struct rec {
    uint64_t seq;
    uint32_t len;
    char text[52];
};

/* Deterministic content for record seq, so the consumer can check every byte. */
static void fill(struct rec *r, uint64_t seq)
{
    memset(r, 0, sizeof(*r));
    r->seq = seq;
    r->len = (uint32_t)(seq % sizeof(r->text));
    for (uint32_t i = 0; i < r->len; i++)
        r->text[i] = (char)('a' + (seq + i) % 26);
}

struct stress {
    struct lc_ring *ring;
    uint64_t n;
    uint64_t full_waits;
};

static void *producer(void *arg)
{
    struct stress *st = arg;
    struct rec r;
    for (uint64_t i = 0; i < st->n; i++) {
        fill(&r, i);
        while (!lc_ring_push(st->ring, &r)) {
            st->full_waits++;
            sched_yield();
        }
    }
    return NULL;
}

static void test_single_thread(void)
{
    CHECK(lc_ring_new(0, 8) == NULL, "elem_size 0 accepted");
    CHECK(lc_ring_new(8, 0) == NULL, "capacity 0 accepted");
    struct lc_ring *r = lc_ring_new(sizeof(int), 5);
    CHECK(r != NULL, "new");
    if (!r)
        return;
    CHECK(lc_ring_capacity(r) == 8, "capacity %zu, want 8", lc_ring_capacity(r));
    int v = -1;
    CHECK(!lc_ring_pop(r, &v) && v == -1, "pop from empty");
    /* Many laps around the ring, with fill levels from 1 to full. */
    int next_in = 0, next_out = 0;
    for (int lap = 0; lap < 50; lap++) {
        int k = lap % 8 + 1;
        for (int i = 0; i < k; i++) {
            CHECK(lc_ring_push(r, &next_in), "push %d", next_in);
            next_in++;
        }
        CHECK(lc_ring_count(r) == (size_t)k, "count %zu want %d", lc_ring_count(r), k);
        if (k == 8) {
            int x = 999;
            CHECK(!lc_ring_push(r, &x), "push into a full ring");
        }
        for (int i = 0; i < k; i++) {
            CHECK(lc_ring_pop(r, &v) && v == next_out, "pop %d got %d", next_out, v);
            next_out++;
        }
        CHECK(!lc_ring_pop(r, &v), "ring not empty after lap %d", lap);
    }
    lc_ring_free(r);
    lc_ring_free(NULL);
}

static void test_stress(uint64_t n, size_t cap)
{
    struct stress st = { lc_ring_new(sizeof(struct rec), cap), n, 0 };
    CHECK(st.ring != NULL, "new");
    if (!st.ring)
        return;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, producer, &st) == 0, "pthread_create");
    struct rec got, want;
    uint64_t bad = 0, empty_waits = 0;
    for (uint64_t i = 0; i < n; i++) {
        while (!lc_ring_pop(st.ring, &got)) {
            empty_waits++;
            sched_yield();
        }
        fill(&want, i);
        if (memcmp(&got, &want, sizeof(got)) != 0 && bad++ < 5)
            CHECK(0, "record %llu: got seq %llu len %u",
                  (unsigned long long)i, (unsigned long long)got.seq, got.len);
    }
    pthread_join(th, NULL);
    CHECK(bad == 0, "%llu records lost, reordered or corrupted", (unsigned long long)bad);
    CHECK(!lc_ring_pop(st.ring, &got), "extra record after %llu", (unsigned long long)n);
    CHECK(lc_ring_count(st.ring) == 0, "count not 0 at the end");
    fprintf(stderr, "stress: %llu records through %zu slots, %llu full waits, %llu empty waits\n",
            (unsigned long long)n, lc_ring_capacity(st.ring), (unsigned long long)st.full_waits,
            (unsigned long long)empty_waits);
    lc_ring_free(st.ring);
}

int main(void)
{
    uint64_t n = 4000000;
    const char *e = getenv("LC_RING_N");
    if (e && *e)
        n = strtoull(e, NULL, 10);
    test_single_thread();
    test_stress(n, 64);
    test_stress(n / 8, 2);
    return tu_finish("test-ring");
}
