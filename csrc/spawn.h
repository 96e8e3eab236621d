/* corral._spawn: start one task of a step from a small stack, not a forked interpreter.
 * See spawn.c for why and for what the child does, in order. */
#ifndef CORRAL_SPAWN_H
#define CORRAL_SPAWN_H

#include <stdint.h>

struct spawn_task {
    int session;                 /* 1: setsid (its terminal becomes its controlling one) */
    int pgid;                    /* else setpgid(0, pgid); 0: a group of its own */
    const char *const *joins;    /* cgroup.procs files to write the pid into; NULL-ended */
    const char *join_error;      /* the message's start when one cannot be joined */
    const int32_t *cpus;         /* the CPUs to pin to (present ones only); none: not pinned */
    int ncpus;
    int stdio[3];                /* dup2'ed onto 0, 1 and 2 */
    int pmi_fd;                  /* kept open across exec; -1: none */
    int switch_user;             /* 0: stay who we are (not root) */
    uint32_t uid;
    uint32_t gid;
    const uint32_t *groups;
    int ngroups;
    const char *user_error;      /* "cannot become user U (uid N, gid N): " */
    const char *note;            /* written to stderr as the user; NULL: none */
    const char *program;         /* argv[0] as given, for execve()'s message */
    const char *const *candidates; /* the paths to try, in PATH's order; NULL-ended */
    char *const *argv;
    char **envp;                 /* two slots free at its end: SLURM_TASK_PID and NULL */
    int nenv;                    /* how many entries envp holds before those */
};

/* The task's pid, or -errno when it could not be started. */
int spawn_task(const struct spawn_task *task);

#endif
