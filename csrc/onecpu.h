/*
 * onecpu: the scheduling core's pass (controller/core/schedule.py's main pass, then
 * backfill.py's) restated in C for the one case a trace replay spends its time in:
 * every node has one CPU, one partition holds them all in selection order, and every
 * job asks for tasks of one CPU, no memory, no GPUs or licenses, for its time limit.
 *
 * It makes the decisions the Python core makes on that input, step by step (the
 * same trial times, the same lazily computed pictures, the same node order and
 * shortcuts), so that a replay's every start is the same; tests/unit/test_onecpu.py
 * compares the two on random queues and clusters, and the replay tests compare
 * whole traces. controller/sim/onecpu.py is its only caller and documents the rules.
 *
 * csrc/onecpu_build.py feeds the declarations below (minus the preprocessor lines)
 * to cffi's cdef, so they must stay plain C that cffi can parse.
 */
#ifndef CORRAL_ONECPU_H
#define CORRAL_ONECPU_H

#include <stdint.h>

/*
 * One pass at `now` (times in seconds). Nodes 0 <= i < nnodes in selection order:
 * node_end[i] is -1 for a free node, else the end time the core knows for the job on
 * it (0: none). Jobs 0 <= j < njobs in the core's order: tasks[j] one-CPU tasks for
 * length[j] seconds (its limit, or the window without one); shape[j] < nshapes is the
 * same for jobs alike (tasks and limit). Backfill tests at most max_tested jobs from
 * the first that cannot start now (max_tested 0: no backfill pass); easy: only the
 * first job backfill cannot start reserves.
 *
 * Writes node_job[i]: the job started on node i, or -1. Returns how many jobs start,
 * or -1 when memory ran out (node_job is then undefined).
 */
int onecpu_pass(int64_t now, int64_t window, int64_t resolution, int32_t max_tested,
                int32_t easy, int32_t nnodes, const int64_t *node_end, int32_t njobs,
                const int32_t *tasks, const int64_t *length, const int32_t *shape,
                int32_t nshapes, int32_t *node_job);

#endif
