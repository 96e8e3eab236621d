/* corral._spawn: start one task of a step the way nodeagent/steprunner.py's forked child
 * does, without forking the runner's interpreter.
 *
 * Why: os.fork of the runner (a Python process of some tens of MiB) and the
 * interpreter's work in the child (copy-on-write faults on every object it
 * touches) cost ~2.7 ms of CPU per task, 76 % of a 250-task node's start.
 * Here the child is a clone(CLONE_VM | CLONE_VFORK) on a stack of its own, as
 * glibc's posix_spawn makes it: no page tables copied, no interpreter run; the
 * runner waits until the child has exec'd or exited.
 *
 * The child shares the runner's memory, so it only makes system calls, writes
 * to its own stack (and the two free slots at the end of envp), and calls
 * nothing that locks or allocates. Ids are switched with raw system calls:
 * glibc's setuid() would try to signal the runner's threads (setxid broadcast).
 *
 * In order, as StepRun._exec_task does: setsid or setpgid; join the run's
 * cgroups; pin the CPUs; handlers of SIGCHLD, SIGUSR1, SIGINT, SIGPIPE and
 * SIGXFSZ back to default and every signal unblocked; oom_score_adj 0; stdio;
 * the controlling terminal (session); the user's groups, gid, uid (checked);
 * the note on stderr; SLURM_TASK_PID; exec along PATH as os.execvpe does. A
 * failure writes slurmstepd's line, with the words Python's would have, to
 * stderr and exits 1 (setup) or with the errno (exec; 2 when it has none).
 */
#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STACK_SIZE (256 * 1024)
#define LINE_SIZE 4096

/* A bounded line built on the child's stack. */
struct line {
    char text[LINE_SIZE];
    size_t len;
};

static void put(struct line *line, const char *s)
{
    while (s && *s && line->len < LINE_SIZE - 1)
        line->text[line->len++] = *s++;
}

static void put_int(struct line *line, long value)
{
    char digits[24];
    int n = 0;
    unsigned long v = value < 0 ? 0UL - (unsigned long)value : (unsigned long)value;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (value < 0)
        digits[n++] = '-';
    while (n && line->len < LINE_SIZE - 1)
        line->text[line->len++] = digits[--n];
}

/* Python's str(OSError): "[Errno N] reason", then ": 'path'" where it names one. */
static void put_oserror(struct line *line, int err, const char *path)
{
    put(line, "[Errno ");
    put_int(line, err);
    put(line, "] ");
    put(line, strerror(err));
    if (path) {
        put(line, ": '");
        put(line, path);
        put(line, "'");
    }
}

static void write_all(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        data += n;
        len -= (size_t)n;
    }
}

static _Noreturn void fail(struct line *line, int status)
{
    put(line, "\n");
    write_all(2, line->text, line->len);
    _exit(status);
}

/* "slurmstepd: error: task setup failed: [Errno N] reason", exit 1. */
static _Noreturn void setup_failed(int err)
{
    struct line line = {.len = 0};
    put(&line, "slurmstepd: error: task setup failed: ");
    put_oserror(&line, err, NULL);
    fail(&line, 1);
}

static int join(const char *procs, const char *pid)
{
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, pid, strlen(pid));
    int err = errno;
    close(fd);
    errno = err;
    return n < 0 ? -2 : 0;
}

static int child(void *arg)
{
    const struct spawn_task *task = arg;
    struct line pid_line = {.len = 0};
    put_int(&pid_line, (long)syscall(SYS_getpid));
    pid_line.text[pid_line.len] = '\0';
    const char *pid = pid_line.text;

    if (task->session ? setsid() < 0 : setpgid(0, task->pgid) < 0)
        setup_failed(errno);
    for (const char *const *procs = task->joins; procs && *procs; procs++) {
        int how = join(*procs, pid);
        if (how) {
            struct line line = {.len = 0};
            put(&line, "slurmstepd: error: ");
            put(&line, task->join_error);
            put_oserror(&line, errno, how == -1 ? *procs : NULL);
            fail(&line, 1);
        }
    }
    if (task->ncpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int i = 0; i < task->ncpus; i++)
            if (task->cpus[i] >= 0 && task->cpus[i] < CPU_SETSIZE)
                CPU_SET(task->cpus[i], &set);
        if (sched_setaffinity(0, sizeof set, &set) < 0)
            setup_failed(errno);
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    static const int defaults[] = {SIGCHLD, SIGUSR1, SIGINT, SIGPIPE, SIGXFSZ};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        sigaction(defaults[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom >= 0) { /* raising is always allowed; where it was never lowered: nothing */
        write_all(oom, "0", 1);
        close(oom);
    }
    for (int target = 0; target < 3; target++) { /* one already in place: kept open */
        int fd = task->stdio[target];
        if (fd == target ? fcntl(fd, F_SETFD, 0) < 0 : dup2(fd, target) < 0)
            setup_failed(errno);
    }
    if (task->session && ioctl(0, TIOCSCTTY, 0) < 0)
        setup_failed(errno);
    if (task->pmi_fd >= 0 && fcntl(task->pmi_fd, F_SETFD, 0) < 0)
        setup_failed(errno);
    if (task->switch_user) {
        int err = 0;
        if (syscall(SYS_setgroups, (size_t)task->ngroups, task->groups) < 0 ||
            syscall(SYS_setgid, task->gid) < 0 || syscall(SYS_setuid, task->uid) < 0)
            err = errno;
        uid_t ruid, euid, suid;
        gid_t rgid, egid, sgid;
        int taken = !err && !syscall(SYS_getresuid, &ruid, &euid, &suid) &&
                    !syscall(SYS_getresgid, &rgid, &egid, &sgid) && ruid == task->uid &&
                    euid == task->uid && rgid == task->gid && egid == task->gid;
        if (!taken) {
            struct line line = {.len = 0};
            put(&line, "slurmstepd: error: ");
            put(&line, task->user_error);
            if (err)
                put_oserror(&line, err, NULL);
            else
                put(&line, "ids not taken");
            fail(&line, 1);
        }
    }
    if (task->note)
        write_all(2, task->note, strlen(task->note));
    struct line env_line = {.len = 0};
    put(&env_line, "SLURM_TASK_PID=");
    put(&env_line, pid);
    env_line.text[env_line.len] = '\0';
    task->envp[task->nenv] = env_line.text;
    task->envp[task->nenv + 1] = NULL;

    /* os.execvpe: the first error that is not ENOENT or ENOTDIR, else the last one. */
    int saved = 0, last = ENOENT;
    for (const char *const *path = task->candidates; *path; path++) {
        execve(*path, task->argv, task->envp);
        last = errno;
        if (!saved && last != ENOENT && last != ENOTDIR)
            saved = last;
    }
    int err = saved ? saved : last;
    struct line line = {.len = 0};
    put(&line, "slurmstepd: error: execve(): ");
    put(&line, task->program);
    put(&line, ": ");
    put(&line, strerror(err ? err : 2));
    fail(&line, err ? err : 2);
}

int spawn_task(const struct spawn_task *task)
{
    char *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -errno;
    int pid = clone(child, stack + STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)task);
    int err = errno;
    munmap(stack, STACK_SIZE);
    return pid < 0 ? -err : pid;
}
