/* The MPI program of the MPI tests and bench/mpi.py: each rank says who and where it
 * is, and the ranks' sum from MPI_Allreduce (which needs every rank wired to every
 * other through PMI's exchange of addresses). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size, sum = 0;
    char host[256];
    const char *node = getenv("SLURMD_NODENAME");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gethostname(host, sizeof host);
    printf("rank=%d size=%d sum=%d node=%s host=%s\n", rank, size, sum, node ? node : "-", host);
    MPI_Finalize();
    return 0;
}
