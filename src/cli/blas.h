/* The BLAS kernel family, chosen before anything else runs (blas.c). */
#ifndef DT_CLI_BLAS_H
#define DT_CLI_BLAS_H

/* May re-execute the program (argv) once with a better OpenBLAS environment. */
void dt_cli_fast_blas(char **argv);

#endif
