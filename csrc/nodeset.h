/*
 * nodeset: a fixed-capacity bitset, one bit per node index, for the scheduler.
 *
 * The C side trusts its caller: every bit index is below the set's capacity and
 * the operands of a two-set operation have the same capacity. corral/nodeset.py
 * checks both before calling in, so a bad index is a Python exception rather
 * than a write past the end of a buffer.
 *
 * Bits past the capacity in the last word are always zero; every operation here
 * keeps them so, which lets count, equal and hash work a whole word at a time.
 *
 * csrc/nodeset_build.py feeds the declarations below (minus the preprocessor
 * lines) to cffi's cdef, so this file is the single statement of the interface
 * and must stay plain C declarations that cffi can parse.
 */
#ifndef CORRAL_NODESET_H
#define CORRAL_NODESET_H

#include <stddef.h>
#include <stdint.h>

typedef struct nodeset nodeset_t;

/* A new empty set of nbits bits, or NULL when out of memory or nbits exceeds INT64_MAX. */
nodeset_t *nodeset_alloc(size_t nbits);
void nodeset_free(nodeset_t *set);

void nodeset_set(nodeset_t *set, size_t bit);
void nodeset_clear(nodeset_t *set, size_t bit);
int nodeset_test(const nodeset_t *set, size_t bit);
/* Set the bits lo <= bit < hi; lo <= hi <= capacity. */
void nodeset_set_range(nodeset_t *set, size_t lo, size_t hi);

size_t nodeset_count(const nodeset_t *set);
/* The lowest set bit (at or after `from`), or -1 when there is none. */
int64_t nodeset_first_set(const nodeset_t *set);
int64_t nodeset_next_set(const nodeset_t *set, size_t from);
/* The lowest clear bit at or after `from` below the capacity, or -1 when there is none. */
int64_t nodeset_next_clear(const nodeset_t *set, size_t from);

/* dst = a op b, word by word; dst may be a or b, which makes the operation in place. */
void nodeset_and(nodeset_t *dst, const nodeset_t *a, const nodeset_t *b);
void nodeset_or(nodeset_t *dst, const nodeset_t *a, const nodeset_t *b);
void nodeset_andnot(nodeset_t *dst, const nodeset_t *a, const nodeset_t *b);
void nodeset_xor(nodeset_t *dst, const nodeset_t *a, const nodeset_t *b);
void nodeset_copy(nodeset_t *dst, const nodeset_t *src);

/* Every bit of a is set in b. */
int nodeset_is_subset(const nodeset_t *a, const nodeset_t *b);
int nodeset_overlaps(const nodeset_t *a, const nodeset_t *b);
/* Same capacity and same bits; unlike the others this accepts any two sets. */
int nodeset_equal(const nodeset_t *a, const nodeset_t *b);
uint64_t nodeset_hash(const nodeset_t *set);

#endif
