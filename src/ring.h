/*
 * ring.h - a lock-free single-producer single-consumer ring of fixed-size records.
 *
 * The engine thread (the one producer) pushes events, the UI thread (the one consumer) pops
 * them; no lock is taken on either side.  The model is the classic Lamport queue on C11
 * atomics: two monotonically increasing counters, `tail` written only by the producer and
 * `head` written only by the consumer.  The producer stores a record into slot tail & mask and
 * then publishes it with a release store of tail + 1; the consumer's acquire load of tail makes
 * the record's bytes visible before it copies them out, and its release store of head hands the
 * slot back.  Each side keeps a private cached copy of the other side's counter so that the
 * shared cache line is read only when the ring looks full (producer) or empty (consumer).
 *
 * Exactly one thread may call the push functions and exactly one (other) thread the pop
 * functions for the life of the ring.  lc_ring_count may be called from either.
 */
#ifndef LC_RING_H
#define LC_RING_H

#include <stdbool.h>
#include <stddef.h>

struct lc_ring;

/*
 * New ring of at least `capacity` records of `elem_size` bytes each (capacity is rounded up
 * to a power of two, at least 2).  Returns NULL when elem_size or capacity is 0, or too large,
 * or on allocation failure.  Free with lc_ring_free once both threads are done with it.
 */
struct lc_ring *lc_ring_new(size_t elem_size, size_t capacity);
void lc_ring_free(struct lc_ring *r);

/* Producer: copy elem_size bytes from elem into the ring.  false (nothing written) if full. */
bool lc_ring_push(struct lc_ring *r, const void *elem);
/* Consumer: copy the oldest record into elem and remove it.  false (elem untouched) if empty. */
bool lc_ring_pop(struct lc_ring *r, void *elem);
/* Records currently queued (a snapshot; exact only from the producer or the consumer thread
 * when the other side is idle). */
size_t lc_ring_count(const struct lc_ring *r);
/* The rounded capacity in records. */
size_t lc_ring_capacity(const struct lc_ring *r);

#endif
