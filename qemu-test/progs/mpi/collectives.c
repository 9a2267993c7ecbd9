// SPDX-License-Identifier: GPL-2.0
/*
 * MPI collectives with every element checked: allreduce (sum), broadcast (from the last
 * rank) and alltoall, at 8 B, 64 KiB, 1 MiB and 4 MiB per rank, each value a function of
 * (rank, index) so a misplaced or stale element shows. Built in the guest with Open MPI's
 * mpicc (qemu-test/tests/mpi.sh). Prints a line per collective and size; exits 0 only when
 * every element on every rank was right.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t val(int rank, size_t i)
{
	return (uint64_t)rank * 0x9e3779b97f4a7c15ull + i * 0x100000001b3ull;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 8, 65536, 1 << 20, 4 << 20 };
	int rank, np, bad = 0, all_bad;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s] / 8, i;
		uint64_t *a = malloc(n * 8 * np), *b = malloc(n * 8 * np);
		int e;

		if (!a || !b)
			MPI_Abort(MPI_COMM_WORLD, 2);
		/* Allreduce: the sum over ranks of val(rank, i). */
		for (i = 0; i < n; i++)
			a[i] = val(rank, i);
		memset(b, 0, n * 8);
		MPI_Allreduce(a, b, (int)n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
		for (e = 0, i = 0; i < n && !e; i++) {
			uint64_t want = 0;
			for (int r = 0; r < np; r++)
				want += val(r, i);
			e = b[i] != want;
		}
		bad += e;
		if (rank == 0 || e)
			printf("rank %d: allreduce %zu B: %s\n", rank, sizes[s], e ? "WRONG" : "ok");
		/* Broadcast from the last rank. */
		for (i = 0; i < n; i++)
			a[i] = rank == np - 1 ? val(np - 1, i) ^ 0x5555 : 0;
		MPI_Bcast(a, (int)n, MPI_UINT64_T, np - 1, MPI_COMM_WORLD);
		for (e = 0, i = 0; i < n && !e; i++)
			e = a[i] != (val(np - 1, i) ^ 0x5555);
		bad += e;
		if (rank == 0 || e)
			printf("rank %d: broadcast %zu B: %s\n", rank, sizes[s], e ? "WRONG" : "ok");
		/* Alltoall: block d of rank r holds val(r * np + d, i); rank d gets it as block r. */
		for (int d = 0; d < np; d++)
			for (i = 0; i < n; i++)
				a[d * n + i] = val(rank * np + d, i);
		memset(b, 0, n * 8 * np);
		MPI_Alltoall(a, (int)n, MPI_UINT64_T, b, (int)n, MPI_UINT64_T, MPI_COMM_WORLD);
		e = 0;
		for (int r = 0; r < np && !e; r++)
			for (i = 0; i < n && !e; i++)
				e = b[r * n + i] != val(r * np + rank, i);
		bad += e;
		if (rank == 0 || e)
			printf("rank %d: alltoall %zu B per rank: %s\n", rank, sizes[s], e ? "WRONG" : "ok");
		free(a);
		free(b);
	}
	MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s: %d rank(s) x collective(s) wrong\n", all_bad ? "FAIL" : "PASS", all_bad);
	MPI_Finalize();
	return all_bad ? 1 : 0;
}
