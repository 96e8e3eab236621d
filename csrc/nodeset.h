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

/*
 * Whole-node claims over time, for backfill: per node, the [begin, end)
 * intervals for which it is promised to a job. Nodes are 0 <= node < nnodes.
 */
typedef struct nodeclaims nodeclaims_t;

nodeclaims_t *nodeclaims_alloc(size_t nnodes);
void nodeclaims_free(nodeclaims_t *claims);
/* Claim node for [begin, end): 0, or -1 when out of memory (nothing changed then). */
int nodeclaims_add(nodeclaims_t *claims, size_t node, int64_t begin, int64_t end);
/* Some claim of node overlaps [begin, end). */
int nodeclaims_overlaps(const nodeclaims_t *claims, size_t node, int64_t begin, int64_t end);
size_t nodeclaims_count(const nodeclaims_t *claims, size_t node);
/* The k-th claim of node in the order added; k < nodeclaims_count(claims, node). */
int64_t nodeclaims_begin(const nodeclaims_t *claims, size_t node, size_t k);
int64_t nodeclaims_end(const nodeclaims_t *claims, size_t node, size_t k);

/*
 * The scheduler's candidate scan: the bits i of mask, ascending from `from`,
 * with counts[i] >= least and (claims not NULL) no claim of i overlapping
 * [begin, end). Writes at most `want` of them to out and returns how many;
 * fewer than `want` means the scan reached the end. counts has one entry per
 * bit of mask, claims as many nodes; from <= capacity.
 */
size_t nodeset_scan(const nodeset_t *mask, const int32_t *counts, int32_t least,
                    const nodeclaims_t *claims, int64_t begin, int64_t end, size_t from,
                    size_t want, uint32_t *out);

#endif
