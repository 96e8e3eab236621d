/*
 * nodeset: the bitset behind corral.nodeset.NodeSet. See nodeset.h for the
 * contract (caller-checked bounds, zero bits past the capacity).
 *
 * Corral runs on Linux with gcc or clang, so the word scans use their
 * popcount and count-trailing-zeros builtins directly.
 */
#include "nodeset.h"

#include <stdlib.h>
#include <string.h>

#define WORD_BITS 64u
#define ALL_ONES (~(uint64_t)0)

struct nodeset {
    size_t nbits;
    size_t nwords;
    uint64_t words[];
};

static uint64_t bit_mask(size_t bit) { return (uint64_t)1 << (bit % WORD_BITS); }

nodeset_t *nodeset_alloc(size_t nbits)
{
    size_t nwords = nbits / WORD_BITS + (nbits % WORD_BITS != 0);
    if ((uint64_t)nbits > (uint64_t)INT64_MAX
        || nwords > (SIZE_MAX - sizeof(nodeset_t)) / sizeof(uint64_t)) {
        return NULL;
    }
    nodeset_t *set = calloc(1, sizeof(nodeset_t) + nwords * sizeof(uint64_t));
    if (set != NULL) {
        set->nbits = nbits;
        set->nwords = nwords;
    }
    return set;
}

void nodeset_free(nodeset_t *set) { free(set); }

void nodeset_set(nodeset_t *set, size_t bit) { set->words[bit / WORD_BITS] |= bit_mask(bit); }

void nodeset_clear(nodeset_t *set, size_t bit)
{
    set->words[bit / WORD_BITS] &= ~bit_mask(bit);
}

int nodeset_test(const nodeset_t *set, size_t bit)
{
    return (set->words[bit / WORD_BITS] & bit_mask(bit)) != 0;
}

void nodeset_set_range(nodeset_t *set, size_t lo, size_t hi)
{
    if (lo >= hi) {
        return;
    }
    size_t first = lo / WORD_BITS;
    size_t last = (hi - 1) / WORD_BITS;
    uint64_t head = ALL_ONES << (lo % WORD_BITS);
    uint64_t tail = ALL_ONES >> (WORD_BITS - 1 - (hi - 1) % WORD_BITS);
    if (first == last) {
        set->words[first] |= head & tail;
        return;
    }
    set->words[first] |= head;
    for (size_t w = first + 1; w < last; w++) {
        set->words[w] = ALL_ONES;
    }
    set->words[last] |= tail;
}

size_t nodeset_count(const nodeset_t *set)
{
    size_t total = 0;
    for (size_t w = 0; w < set->nwords; w++) {
        total += (size_t)__builtin_popcountll(set->words[w]);
    }
    return total;
}

/* The lowest bit at or after `from` that is set in words[] XOR flip (flip is 0 or all ones). */
static int64_t scan(const nodeset_t *set, size_t from, uint64_t flip)
{
    if (from >= set->nbits) {
        return -1;
    }
    size_t w = from / WORD_BITS;
    uint64_t word = (set->words[w] ^ flip) & (ALL_ONES << (from % WORD_BITS));
    while (word == 0) {
        if (++w == set->nwords) {
            return -1;
        }
        word = set->words[w] ^ flip;
    }
    size_t bit = w * WORD_BITS + (size_t)__builtin_ctzll(word);
    return bit < set->nbits ? (int64_t)bit : -1;
}

int64_t nodeset_first_set(const nodeset_t *set) { return scan(set, 0, 0); }

int64_t nodeset_next_set(const nodeset_t *set, size_t from) { return scan(set, from, 0); }

int64_t nodeset_next_clear(const nodeset_t *set, size_t from) { return scan(set, from, ALL_ONES); }

void nodeset_and(nodeset_t *dst, const nodeset_t *a, const nodeset_t *b)
{
    for (size_t w = 0; w < dst->nwords; w++) {
        dst->words[w] = a->words[w] & b->words[w];
    }
}

void nodeset_or(nodeset_t *dst, const nodeset_t *a, const nodeset_t *b)
{
    for (size_t w = 0; w < dst->nwords; w++) {
        dst->words[w] = a->words[w] | b->words[w];
    }
}

void nodeset_andnot(nodeset_t *dst, const nodeset_t *a, const nodeset_t *b)
{
    for (size_t w = 0; w < dst->nwords; w++) {
        dst->words[w] = a->words[w] & ~b->words[w];
    }
}

void nodeset_xor(nodeset_t *dst, const nodeset_t *a, const nodeset_t *b)
{
    for (size_t w = 0; w < dst->nwords; w++) {
        dst->words[w] = a->words[w] ^ b->words[w];
    }
}

void nodeset_copy(nodeset_t *dst, const nodeset_t *src)
{
    memcpy(dst->words, src->words, src->nwords * sizeof(uint64_t));
}

int nodeset_is_subset(const nodeset_t *a, const nodeset_t *b)
{
    for (size_t w = 0; w < a->nwords; w++) {
        if ((a->words[w] & ~b->words[w]) != 0) {
            return 0;
        }
    }
    return 1;
}

int nodeset_overlaps(const nodeset_t *a, const nodeset_t *b)
{
    for (size_t w = 0; w < a->nwords; w++) {
        if ((a->words[w] & b->words[w]) != 0) {
            return 1;
        }
    }
    return 0;
}

int nodeset_equal(const nodeset_t *a, const nodeset_t *b)
{
    return a->nbits == b->nbits
           && memcmp(a->words, b->words, a->nwords * sizeof(uint64_t)) == 0;
}

/* FNV-1a over whole words, each folded with a multiply-xorshift so nearby sets spread out. */
uint64_t nodeset_hash(const nodeset_t *set)
{
    uint64_t h = 0xcbf29ce484222325u ^ (uint64_t)set->nbits;
    for (size_t w = 0; w < set->nwords; w++) {
        uint64_t x = set->words[w] * 0x9e3779b97f4a7c15u;
        h = (h ^ (x ^ (x >> 32))) * 0x100000001b3u;
    }
    return h;
}
