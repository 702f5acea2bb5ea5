/*
 * scratch.c - the per-thread scratch buffer of the ISA files' prompt GEMMs (kernels.h:
 * lc_kernel_scratch), kept from call to call instead of a malloc and free per call.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "kernels.h"

struct scratch {
    size_t size; /* bytes usable from data */
    uint8_t pad[56];
    uint8_t data[]; /* 64-byte aligned: the struct is, and the header is 64 bytes */
};
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool key_ok;

static void key_init(void)
{
    key_ok = pthread_key_create(&key, free) == 0;
}

uint8_t *lc_kernel_scratch(size_t bytes)
{
    pthread_once(&once, key_init);
    if (!key_ok)
        return NULL;
    struct scratch *p = pthread_getspecific(key);
    if (p && p->size >= bytes)
        return p->data;
    if (p) { /* too small: replaced (clearing a slot that was set cannot fail) */
        pthread_setspecific(key, NULL);
        free(p);
    }
    bytes = (bytes + 4095) / 4096 * 4096;
    p = aligned_alloc(64, sizeof *p + bytes);
    if (!p)
        return NULL;
    p->size = bytes;
    if (pthread_setspecific(key, p) != 0) {
        free(p);
        return NULL;
    }
    return p->data;
}
