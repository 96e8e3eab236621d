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

/* ------------------------------------------------------------------ claims */

struct span {
    int64_t begin;
    int64_t end;
};

struct claimlist {
    struct span *spans;
    uint32_t len;
    uint32_t cap;
};

struct nodeclaims {
    size_t nnodes;
    struct claimlist nodes[];
};

nodeclaims_t *nodeclaims_alloc(size_t nnodes)
{
    if (nnodes > (SIZE_MAX - sizeof(nodeclaims_t)) / sizeof(struct claimlist)) {
        return NULL;
    }
    nodeclaims_t *claims = calloc(1, sizeof(nodeclaims_t) + nnodes * sizeof(struct claimlist));
    if (claims != NULL) {
        claims->nnodes = nnodes;
    }
    return claims;
}

void nodeclaims_free(nodeclaims_t *claims)
{
    if (claims == NULL) {
        return;
    }
    for (size_t i = 0; i < claims->nnodes; i++) {
        free(claims->nodes[i].spans);
    }
    free(claims);
}

int nodeclaims_add(nodeclaims_t *claims, size_t node, int64_t begin, int64_t end)
{
    struct claimlist *list = &claims->nodes[node];
    if (list->len == list->cap) {
        if (list->cap > UINT32_MAX / 2) {
            return -1;
        }
        uint32_t cap = list->cap ? list->cap * 2 : 4;
        struct span *grown = realloc(list->spans, (size_t)cap * sizeof(struct span));
        if (grown == NULL) {
            return -1;
        }
        list->spans = grown;
        list->cap = cap;
    }
    list->spans[list->len].begin = begin;
    list->spans[list->len].end = end;
    list->len++;
    return 0;
}

int nodeclaims_overlaps(const nodeclaims_t *claims, size_t node, int64_t begin, int64_t end)
{
    const struct claimlist *list = &claims->nodes[node];
    for (uint32_t k = 0; k < list->len; k++) {
        if (list->spans[k].begin < end && begin < list->spans[k].end) {
            return 1;
        }
    }
    return 0;
}

size_t nodeclaims_count(const nodeclaims_t *claims, size_t node) { return claims->nodes[node].len; }

int64_t nodeclaims_begin(const nodeclaims_t *claims, size_t node, size_t k)
{
    return claims->nodes[node].spans[k].begin;
}

int64_t nodeclaims_end(const nodeclaims_t *claims, size_t node, size_t k)
{
    return claims->nodes[node].spans[k].end;
}

/* -------------------------------------------------------------------- scan */

size_t nodeset_scan(const nodeset_t *mask, const int32_t *counts, int32_t least,
                    const nodeclaims_t *claims, int64_t begin, int64_t end, size_t from,
                    size_t want, uint32_t *out)
{
    size_t found = 0;
    if (want == 0 || from >= mask->nbits) {
        return 0;
    }
    size_t w = from / WORD_BITS;
    uint64_t word = mask->words[w] & (ALL_ONES << (from % WORD_BITS));
    for (;;) {
        while (word != 0) {
            size_t bit = w * WORD_BITS + (size_t)__builtin_ctzll(word);
            word &= word - 1;
            if (counts[bit] < least) {
                continue;
            }
            if (claims != NULL && nodeclaims_overlaps(claims, bit, begin, end)) {
                continue;
            }
            out[found++] = (uint32_t)bit;
            if (found == want) {
                return found;
            }
        }
        if (++w == mask->nwords) {
            return found;
        }
        word = mask->words[w];
    }
}
