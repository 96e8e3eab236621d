/*
 * onecpu: the core's pass for clusters of one-CPU nodes (see onecpu.h).
 *
 * Each function below names the Python it restates. With one CPU per node a node
 * is free or not, so the core's per-node views become bits: a trial time's picture
 * (core/timeline.py's _State) is two bitsets, the nodes free then and the nodes some
 * release has given back by then, and each node has at most one release (a job is
 * started only on a free node). Backfill's whole-node claims are intervals of bits.
 */
#include "onecpu.h"

#include <stdlib.h>
#include <string.h>

#define NONE INT64_MAX /* no time: never released, nothing found */

typedef uint64_t word;

struct release {
    int64_t at;
    int32_t node;
};

struct resume {
    int64_t when;
    int32_t shape, node;
};

struct pass {
    int64_t now, horizon, res, first;
    int32_t n, words;
    word *free_now;  /* free now, after this pass's starts (backfill.py: self.nodes) */
    int32_t nfree;   /* how many */
    int64_t *rel_at; /* per node: when its job ends within the window, else NONE */
    struct release *rels; /* Timeline._releases: sorted by time, equal times in insertion order */
    int32_t nrels, caprels;
    int64_t *times; /* Timeline.times */
    int32_t ntimes, captimes;
    word *states;     /* per computed time: free bits, then gained bits */
    int32_t computed; /* len(Timeline._states) */
    int64_t *claim_begin, *claim_end; /* Reservations: per plan, when */
    word *claim_nodes;                /* and which nodes */
    int32_t nclaims, capclaims;
    word *scratch, *chosen; /* scratch: candidates; the gained ones, then the nodes chosen */
    int64_t *floor;           /* Backfill.floor per shape (0: none) */
    struct resume *resumes;   /* Backfill.resume */
    int32_t nresumes, capresumes;
    int32_t *pick; /* scratch: the nodes chosen */
    int oom;
};

static int64_t ceil_to(int64_t t, int64_t resolution)
{
    int64_t q = t / resolution;
    if (q * resolution < t) {
        q++;
    }
    return q * resolution;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int test_bit(const word *set, int32_t i) { return (int)((set[i >> 6] >> (i & 63)) & 1u); }
static void set_bit(word *set, int32_t i) { set[i >> 6] |= (word)1 << (i & 63); }
static void clear_bit(word *set, int32_t i) { set[i >> 6] &= ~((word)1 << (i & 63)); }

static int32_t count_bits(const word *set, int32_t words)
{
    int32_t n = 0;
    for (int32_t w = 0; w < words; w++) {
        n += __builtin_popcountll(set[w]);
    }
    return n;
}

/* Room for `want` items of `size` bytes in *items (capacity *cap); 0 when out of memory. */
static int grow(void **items, int32_t *cap, int32_t want, size_t size)
{
    if (want <= *cap) {
        return 1;
    }
    int32_t next = *cap ? *cap : 16;
    while (next < want) {
        next *= 2;
    }
    void *grown = realloc(*items, (size_t)next * size);
    if (!grown) {
        return 0;
    }
    *items = grown;
    *cap = next;
    return 1;
}

/* ---- the pictures at trial times (core/timeline.py) */

static word *state_free(struct pass *p, int32_t k) { return p->states + (size_t)k * 2 * p->words; }
static word *state_gained(struct pass *p, int32_t k) { return state_free(p, k) + p->words; }

/* The first release later than `t` (bisect_right). */
static int32_t releases_after(const struct pass *p, int64_t t)
{
    int32_t lo = 0, hi = p->nrels;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (p->rels[mid].at <= t) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Timeline._next: the picture at times[k] from the one before it (or from now). */
static void compute_state(struct pass *p, int32_t k)
{
    word *free = state_free(p, k), *gained = state_gained(p, k);
    int64_t begin;
    if (k == 0) {
        memcpy(free, p->free_now, (size_t)p->words * sizeof(word));
        memset(gained, 0, (size_t)p->words * sizeof(word));
        begin = -1;
    } else {
        memcpy(free, state_free(p, k - 1), (size_t)p->words * 2 * sizeof(word));
        begin = p->times[k - 1];
    }
    int32_t hi = releases_after(p, p->times[k]);
    for (int32_t r = releases_after(p, begin); r < hi; r++) {
        set_bit(free, p->rels[r].node);
        set_bit(gained, p->rels[r].node);
    }
}

/* Timeline._state: computed in time order, when first asked for. */
static void ensure_state(struct pass *p, int32_t i)
{
    while (p->computed <= i) {
        compute_state(p, p->computed);
        p->computed++;
    }
}

/* Timeline.add: `when` (on the resolution) becomes a trial time. */
static void add_time(struct pass *p, int64_t when)
{
    if (when < p->first || when >= p->horizon) {
        return;
    }
    int32_t k = 0, hi = p->ntimes;
    while (k < hi) {
        int32_t mid = k + (hi - k) / 2;
        if (p->times[mid] < when) {
            k = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (k < p->ntimes && p->times[k] == when) {
        return;
    }
    int32_t cap = p->captimes;
    if (!grow((void **)&p->times, &p->captimes, p->ntimes + 1, sizeof(int64_t))) {
        p->oom = 1;
        return;
    }
    if (p->captimes != cap) {
        word *grown = realloc(p->states, (size_t)p->captimes * 2 * p->words * sizeof(word));
        if (!grown) {
            p->oom = 1;
            return;
        }
        p->states = grown;
    }
    memmove(p->times + k + 1, p->times + k, (size_t)(p->ntimes - k) * sizeof(int64_t));
    p->times[k] = when;
    p->ntimes++;
    if (k < p->computed) {
        memmove(state_free(p, k + 1), state_free(p, k),
                (size_t)(p->computed - k) * 2 * p->words * sizeof(word));
        compute_state(p, k);
        p->computed++;
    }
}

/* A release of `node` at `at` (insort: after those at the same time). */
static void add_release(struct pass *p, int32_t node, int64_t at)
{
    if (!grow((void **)&p->rels, &p->caprels, p->nrels + 1, sizeof(struct release))) {
        p->oom = 1;
        return;
    }
    int32_t k = releases_after(p, at);
    memmove(p->rels + k + 1, p->rels + k, (size_t)(p->nrels - k) * sizeof(struct release));
    p->rels[k].at = at;
    p->rels[k].node = node;
    p->nrels++;
    p->rel_at[node] = at;
}

/* Timeline.take: a job backfill starts now on `nodes`, until `end` (NONE: past the window). */
static void take(struct pass *p, const int32_t *nodes, int32_t count, int64_t end)
{
    for (int32_t k = 0; k < p->computed; k++) {
        if (end != NONE && p->times[k] >= end) {
            break;
        }
        for (int32_t c = 0; c < count; c++) {
            clear_bit(state_free(p, k), nodes[c]);
        }
    }
    if (end != NONE) {
        for (int32_t c = 0; c < count; c++) {
            add_release(p, nodes[c], end);
        }
        add_time(p, ceil_to(end, p->res));
    }
}

/* ---- backfill's claims (core/nodeindex.py's Reservations): whole nodes promised
 * to a job ahead over [begin, end), one entry per plan, its nodes as bits */

static word *claim_nodes(const struct pass *p, int32_t k)
{
    return p->claim_nodes + (size_t)k * p->words;
}

static void claim(struct pass *p, int64_t begin, int64_t end, const int32_t *nodes, int32_t count)
{
    int32_t cap = p->capclaims;
    if (!grow((void **)&p->claim_begin, &p->capclaims, p->nclaims + 1, sizeof(int64_t))) {
        p->oom = 1;
        return;
    }
    if (p->capclaims != cap) {
        int64_t *ends = realloc(p->claim_end, (size_t)p->capclaims * sizeof(int64_t));
        word *bits = ends ? realloc(p->claim_nodes, (size_t)p->capclaims * p->words * sizeof(word))
                          : NULL;
        if (ends) {
            p->claim_end = ends;
        }
        if (!bits) {
            p->capclaims = cap;
            p->oom = 1;
            return;
        }
        p->claim_nodes = bits;
    }
    int32_t k = p->nclaims++;
    p->claim_begin[k] = begin;
    p->claim_end[k] = end;
    word *bits = claim_nodes(p, k);
    memset(bits, 0, (size_t)p->words * sizeof(word));
    for (int32_t c = 0; c < count; c++) {
        set_bit(bits, nodes[c]);
    }
}

/* Reservations.during: into `out`, the nodes claimed at some moment of [begin, end). */
static void claimed(const struct pass *p, int64_t begin, int64_t end, word *out)
{
    memset(out, 0, (size_t)p->words * sizeof(word));
    for (int32_t k = 0; k < p->nclaims; k++) {
        if (p->claim_begin[k] < end && begin < p->claim_end[k]) {
            const word *bits = claim_nodes(p, k);
            for (int32_t w = 0; w < p->words; w++) {
                out[w] |= bits[w];
            }
        }
    }
}

/* Reservations.free_from: from `begin` on, before `limit`, the first time none of the
 * nodes of `chosen` is claimed for `length` seconds; NONE if there is none. */
static int64_t free_from(const struct pass *p, int64_t begin, int64_t length, const word *chosen,
                         int64_t limit)
{
    while (begin < limit) {
        int64_t latest = NONE;
        for (int32_t k = 0; k < p->nclaims; k++) {
            if (!(p->claim_begin[k] < begin + length && begin < p->claim_end[k])) {
                continue;
            }
            const word *bits = claim_nodes(p, k);
            for (int32_t w = 0; w < p->words; w++) {
                if (bits[w] & chosen[w]) {
                    latest = latest == NONE ? p->claim_end[k] : max64(latest, p->claim_end[k]);
                    break;
                }
            }
        }
        if (latest == NONE) {
            return begin;
        }
        begin = latest;
    }
    return NONE;
}

/* ---- placement (placement.place's plain path: the first candidates in order) */

/* The first `want` nodes of `set` from position `from` on, in order, into out; how many
 * there are (at most want). */
static int32_t first_bits(const word *set, int32_t words, int32_t from, int32_t want, int32_t *out)
{
    int32_t found = 0;
    if (want <= 0) {
        return 0;
    }
    for (int32_t w = from >> 6; w < words; w++) {
        word bits = set[w];
        if (w == from >> 6) {
            bits &= ~(word)0 << (from & 63);
        }
        while (bits) {
            out[found++] = (w << 6) + __builtin_ctzll(bits);
            if (found == want) {
                return found;
            }
            bits &= bits - 1;
        }
    }
    return found;
}

/* ---- backfill.py */

/* Backfill._start_now for a job of `tasks` tasks and `length` seconds: 1 if it starts. */
static int start_now(struct pass *p, int32_t job, int32_t tasks, int64_t length,
                     int32_t *node_job)
{
    if (p->nfree < tasks) {
        return 0;
    }
    claimed(p, p->now, ceil_to(p->now + length, p->res), p->scratch);
    for (int32_t w = 0; w < p->words; w++) {
        p->scratch[w] = p->free_now[w] & ~p->scratch[w];
    }
    if (first_bits(p->scratch, p->words, 0, tasks, p->pick) < tasks) {
        return 0;
    }
    for (int32_t c = 0; c < tasks; c++) {
        node_job[p->pick[c]] = job;
        clear_bit(p->free_now, p->pick[c]);
    }
    p->nfree -= tasks;
    int64_t until = p->now + length;
    take(p, p->pick, tasks, until < p->horizon ? until : NONE);
    return 1;
}

static int32_t *resume_of(struct pass *p, int64_t when, int32_t shape)
{
    for (int32_t k = 0; k < p->nresumes; k++) {
        if (p->resumes[k].when == when && p->resumes[k].shape == shape) {
            return &p->resumes[k].node;
        }
    }
    return NULL;
}

static void remember(struct pass *p, int64_t when, int32_t shape, int32_t node)
{
    int32_t *kept = resume_of(p, when, shape);
    if (kept) {
        *kept = node;
        return;
    }
    if (!grow((void **)&p->resumes, &p->capresumes, p->nresumes + 1, sizeof(struct resume))) {
        p->oom = 1;
        return;
    }
    p->resumes[p->nresumes].when = when;
    p->resumes[p->nresumes].shape = shape;
    p->resumes[p->nresumes].node = node;
    p->nresumes++;
}

/* Backfill._sooner: the earliest time from which the chosen nodes hold the job, up to `probe`. */
static int64_t sooner(struct pass *p, int32_t tasks, int64_t length, int64_t probe)
{
    int64_t ready = p->now;
    memset(p->chosen, 0, (size_t)p->words * sizeof(word));
    for (int32_t c = 0; c < tasks; c++) {
        int32_t node = p->pick[c];
        set_bit(p->chosen, node);
        if (!test_bit(p->free_now, node) && p->rel_at[node] != NONE) {
            ready = max64(ready, p->rel_at[node]);
        }
    }
    int64_t from = max64(max64(ceil_to(ready, p->res), p->now + p->res), 0);
    if (from >= probe) {
        return probe;
    }
    int64_t span = ceil_to(from + length, p->res) - from;
    int64_t clear = free_from(p, from, span, p->chosen, probe);
    return clear == NONE ? probe : clear;
}

/* Backfill._earliest then _claim: reserve the earliest nodes and time the job fits at. */
static void reserve(struct pass *p, int32_t tasks, int64_t length, int32_t shape)
{
    int64_t first = p->floor[shape];
    int32_t ntimes = p->ntimes, words = p->words;
    word *cand = p->scratch;
    for (int32_t i = 0; i < ntimes; i++) {
        int64_t when = p->times[i];
        if (when < first) {
            continue;
        }
        ensure_state(p, i);
        const word *free = state_free(p, i), *gained = state_gained(p, i);
        if (count_bits(free, words) < tasks) {
            continue;
        }
        claimed(p, when, ceil_to(when + length, p->res), cand);
        int prefer = 0;
        for (int32_t w = 0; w < words; w++) {
            cand[w] = free[w] & ~cand[w];
            prefer |= gained[w] != 0;
        }
        int32_t chosen;
        if (prefer) { /* the nodes some end gives back first, then those free now */
            for (int32_t w = 0; w < words; w++) {
                p->chosen[w] = cand[w] & gained[w];
                cand[w] &= ~gained[w];
            }
            chosen = first_bits(p->chosen, words, 0, tasks, p->pick);
            chosen += first_bits(cand, words, 0, tasks - chosen, p->pick + chosen);
        } else {
            int32_t *after = resume_of(p, when, shape);
            chosen = first_bits(cand, words, after ? *after : 0, tasks, p->pick);
        }
        if (chosen < tasks) {
            continue;
        }
        if (!prefer) {
            remember(p, when, shape, p->pick[0]);
        }
        int64_t start = sooner(p, tasks, length, when);
        p->floor[shape] = when;
        int64_t until = ceil_to(start + length, p->res);
        claim(p, start, until, p->pick, tasks);
        add_time(p, until);
        return;
    }
    p->floor[shape] = p->horizon;
}

static void release_pass(struct pass *p)
{
    free(p->claim_begin);
    free(p->claim_end);
    free(p->claim_nodes);
    free(p->scratch);
    free(p->chosen);
    free(p->free_now);
    free(p->rel_at);
    free(p->rels);
    free(p->times);
    free(p->states);
    free(p->floor);
    free(p->resumes);
    free(p->pick);
}

/* Timeline.__init__'s trial times: each release and the doubling offsets from now. */
static void initial_times(struct pass *p)
{
    for (int32_t r = 0; r < p->nrels; r++) {
        add_time(p, max64(ceil_to(p->rels[r].at, p->res), p->first));
    }
    for (int64_t step = p->res;; step *= 2) {
        int64_t when = ceil_to(p->now + step, p->res);
        if (when >= p->horizon) {
            break;
        }
        add_time(p, max64(when, p->first));
    }
}

int onecpu_pass(int64_t now, int64_t window, int64_t resolution, int32_t max_tested,
                int32_t easy, int32_t nnodes, const int64_t *node_end, int32_t njobs,
                const int32_t *tasks, const int64_t *length, const int32_t *shape,
                int32_t nshapes, int32_t *node_job)
{
    struct pass p;
    memset(&p, 0, sizeof p);
    p.now = now;
    p.horizon = now + window;
    p.res = resolution;
    p.first = ceil_to(now + resolution, resolution);
    p.n = nnodes;
    p.words = (nnodes + 63) / 64;
    if (p.words == 0) {
        p.words = 1;
    }
    p.free_now = calloc((size_t)p.words, sizeof(word));
    p.rel_at = malloc((size_t)(nnodes ? nnodes : 1) * sizeof(int64_t));
    p.scratch = calloc((size_t)p.words, sizeof(word));
    p.chosen = calloc((size_t)p.words, sizeof(word));
    p.floor = calloc((size_t)(nshapes ? nshapes : 1), sizeof(int64_t));
    p.pick = malloc((size_t)(nnodes ? nnodes : 1) * sizeof(int32_t));
    if (!p.free_now || !p.rel_at || !p.scratch || !p.chosen || !p.floor || !p.pick) {
        release_pass(&p);
        return -1;
    }
    int32_t started = 0;
    for (int32_t i = 0; i < nnodes; i++) {
        node_job[i] = -1;
        p.rel_at[i] = NONE;
        if (node_end[i] == -1) {
            set_bit(p.free_now, i);
            p.nfree++;
        } else if (node_end[i] != 0 && node_end[i] < p.horizon) { /* Backfill.releases */
            add_release(&p, i, node_end[i]);
        }
    }
    /* schedule's main pass: in order while they fit; the first that does not blocks. */
    int32_t j = 0;
    for (; j < njobs && p.nfree >= tasks[j]; j++) {
        int32_t taken = first_bits(p.free_now, p.words, 0, tasks[j], p.pick);
        int64_t until = now + length[j]; /* Backfill.started */
        for (int32_t c = 0; c < taken; c++) {
            node_job[p.pick[c]] = j;
            clear_bit(p.free_now, p.pick[c]);
            if (until < p.horizon) {
                add_release(&p, p.pick[c], until);
            }
        }
        p.nfree -= taken;
        started++;
    }
    /* Backfill.run over the rest, from the head. */
    if (j < njobs && max_tested > 0) {
        initial_times(&p);
        int reserved = 0;
        for (int32_t tested = 0; j < njobs && tested < max_tested && !p.oom; j++, tested++) {
            if (start_now(&p, j, tasks[j], length[j], node_job)) {
                started++;
                continue;
            }
            if (easy) {
                if (reserved) {
                    continue;
                }
                reserved = 1;
            }
            reserve(&p, tasks[j], length[j], shape[j]);
        }
    }
    int oom = p.oom;
    release_pass(&p);
    return oom ? -1 : started;
}
