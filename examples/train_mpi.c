/* The distributed example of include/dtrain.h: every rank calls dt_train with the same
 * configuration (here: allreduce, cnn1, the first 8192 MNIST training examples split between
 * the ranks, one epoch, 1000 test images). Exit status 0 when the agreed model's test accuracy
 * reaches the bar (argument 1, default 0.70), 1 below it, 2 on an error.
 *
 *     cc train_mpi.c $(pkg-config --cflags --libs dtrain mpich) -o train_mpi
 *     mpiexec -n 2 ./train_mpi [MIN_ACCURACY]         # MNIST from $DTRAIN_DATA/mnist or data/mnist
 */
#include <dtrain.h>
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const double bar = argc > 1 ? atof(argv[1]) : 0.70;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    dt_train_config c;
    dt_train_config_defaults(&c);                    /* the dtrain command's defaults */
    c.model = "cnn1";
    c.data = "mnist";                                /* from $DTRAIN_DATA/mnist or data/mnist */
    c.scheme.name = "allreduce";                       /* dt_scheme_names(): the schemes */
    c.epochs = 1;
    c.train_limit = 8192;
    c.test_limit = 1000;
    c.momentum = 0.9f;
    c.lr = 0.05f;
    c.quiet = 1;
    dt_train_result r;
    int status;
    if (dt_train(&c, &r) != DT_OK) {
        fprintf(stderr, "train_mpi: rank %d: %s\n", rank, dt_last_error());
        status = 2;
    } else {
        /* the final model is evaluated on rank 0: its verdict is every rank's exit status */
        status = r.test_acc >= bar ? 0 : 1;
        MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("train_mpi: %ld steps per rank, test accuracy %.4f (bar %.2f)\n", r.steps,
                   r.test_acc, bar);
    }
    MPI_Finalize();
    return status;
}
