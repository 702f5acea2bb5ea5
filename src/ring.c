/* ring.c - lock-free SPSC ring; the memory-order argument is at the top of ring.h. */
#include "ring.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Keep the producer's and the consumer's counters on different cache lines (no false sharing). */
#define LC_CACHELINE 64

struct lc_ring {
    /* read-only after creation */
    unsigned char *slots;
    size_t elem_size;
    size_t mask;            /* capacity - 1 */
    /* producer side */
    alignas(LC_CACHELINE) atomic_size_t tail;   /* next slot to write; written by the producer */
    size_t head_cache;                          /* producer's last view of head */
    /* consumer side */
    alignas(LC_CACHELINE) atomic_size_t head;   /* next slot to read; written by the consumer */
    size_t tail_cache;                          /* consumer's last view of tail */
};

struct lc_ring *lc_ring_new(size_t elem_size, size_t capacity)
{
    if (elem_size == 0 || capacity == 0 || capacity > ((size_t)1 << 30) ||
        elem_size > ((size_t)1 << 20))
        return NULL;
    size_t cap = 2;
    while (cap < capacity)
        cap <<= 1;
    if (cap > SIZE_MAX / elem_size)
        return NULL;
    struct lc_ring *r = aligned_alloc(LC_CACHELINE, sizeof(*r));
    if (!r)
        return NULL;
    memset(r, 0, sizeof(*r));
    r->slots = malloc(cap * elem_size);
    if (!r->slots) {
        free(r);
        return NULL;
    }
    r->elem_size = elem_size;
    r->mask = cap - 1;
    atomic_init(&r->tail, 0);
    atomic_init(&r->head, 0);
    return r;
}

void lc_ring_free(struct lc_ring *r)
{
    if (!r)
        return;
    free(r->slots);
    free(r);
}

bool lc_ring_push(struct lc_ring *r, const void *elem)
{
    /* Only this thread writes tail: a relaxed load of our own counter is exact. */
    size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (tail - r->head_cache > r->mask) {
        /* Looks full: refresh our view of head.  Acquire pairs with the consumer's release
         * store, so its copy out of the slot happened before we overwrite it. */
        r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
        if (tail - r->head_cache > r->mask)
            return false;
    }
    memcpy(r->slots + (tail & r->mask) * r->elem_size, elem, r->elem_size);
    /* Release: the record's bytes are visible before the new tail is. */
    atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
    return true;
}

bool lc_ring_pop(struct lc_ring *r, void *elem)
{
    size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (head == r->tail_cache) {
        /* Looks empty: acquire pairs with the producer's release store of tail. */
        r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head == r->tail_cache)
            return false;
    }
    memcpy(elem, r->slots + (head & r->mask) * r->elem_size, r->elem_size);
    /* Release: we are done reading the slot before the producer may reuse it. */
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
    return true;
}

size_t lc_ring_count(const struct lc_ring *r)
{
    size_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    return tail - head;
}

size_t lc_ring_capacity(const struct lc_ring *r)
{
    return r->mask + 1;
}
