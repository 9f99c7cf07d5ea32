/*
 * sgemm_peak: single-thread OpenBLAS sgemm throughput.
 *
 * Prints which OpenBLAS core (kernel set) is in use, the GFLOP/s of a large
 * square sgemm (the "peak" dtrain's throughput is compared with) and the
 * GFLOP/s of the GEMM shapes dtrain's layers produce (or of shapes given on
 * the command line).
 *
 *   sgemm_peak [--min-time SEC] [--peak N] [--no-shapes] [SHAPE...]
 *
 * SHAPE is MxNxK or MxNxK:AB where A and B are N (no transpose) or T
 * (transpose) for the A and B operands, row-major, e.g. 64x128x9216:NT.
 * C[MxN] = op(A)[MxK] * op(B)[KxN].
 *
 * Output (one line each):
 *   sgemm_info core=<name> threads=<n> config="<openblas_get_config()>"
 *   sgemm core=<name> shape=<MxNxK> gflops=<float> trans=<AB> name=<label>
 *   sgemm_peak gflops=<float> core=<name> n=<N>
 *
 * Build: cc -O2 -Wall -Wextra -Werror -I/usr/include/x86_64-linux-gnu/openblas-pthread \
 *           bench/sgemm_peak.c -lopenblas -o sgemm_peak
 * Select AVX-512 kernels on CPUs OpenBLAS 0.3.21 does not know: OPENBLAS_CORETYPE=SkylakeX.
 */
#define _POSIX_C_SOURCE 200809L

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct shape {
    int m, n, k;
    char ta, tb; /* 'N' or 'T' */
    const char *name;
};

/*
 * Shapes of the im2col convolutions and FC layers of the dtrain models
 * (per image for convolutions: M=OC, N=OH*OW, K=C*kh*kw; FC at batch 64:
 * M=batch, N=out, K=in).  For each layer: forward, grad-weights, grad-input.
 *   conv fwd:  Y[OC x P]    = W[OC x CKK]  * col[CKK x P]         NN
 *   conv dW:   dW[OC x CKK] = dY[OC x P]   * col[CKK x P]^T       NT
 *   conv dcol: dcol[CKK x P]= W[OC x CKK]^T* dY[OC x P]           TN
 *   fc fwd:    Y[B x O]     = X[B x I]     * W[O x I]^T           NT
 *   fc dX:     dX[B x I]    = dY[B x O]    * W[O x I]             NN
 *   fc dW:     dW[O x I]    = dY[B x O]^T  * X[B x I]             TN
 */
static const struct shape builtin[] = {
    /* cnn1 */
    {10, 576, 25, 'N', 'N', "cnn1.conv1.fwd"},
    {10, 25, 576, 'N', 'T', "cnn1.conv1.dw"},
    {20, 64, 250, 'N', 'N', "cnn1.conv2.fwd"},
    {20, 250, 64, 'N', 'T', "cnn1.conv2.dw"},
    {250, 64, 20, 'T', 'N', "cnn1.conv2.dcol"},
    {64, 100, 320, 'N', 'T', "cnn1.fc1.fwd"},
    {64, 320, 100, 'N', 'N', "cnn1.fc1.dx"},
    {100, 320, 64, 'T', 'N', "cnn1.fc1.dw"},
    /* cnn2 */
    {10, 676, 9, 'N', 'N', "cnn2.conv1.fwd"},
    {20, 121, 90, 'N', 'N', "cnn2.conv2.fwd"},
    {64, 100, 500, 'N', 'T', "cnn2.fc1.fwd"},
    /* downpour-cnn */
    {32, 676, 9, 'N', 'N', "downpour.conv1.fwd"},
    {32, 9, 676, 'N', 'T', "downpour.conv1.dw"},
    {64, 576, 288, 'N', 'N', "downpour.conv2.fwd"},
    {64, 288, 576, 'N', 'T', "downpour.conv2.dw"},
    {288, 576, 64, 'T', 'N', "downpour.conv2.dcol"},
    {64, 36864, 288, 'N', 'N', "downpour.conv2.fwd.batch64"},
    {64, 128, 9216, 'N', 'T', "downpour.fc1.fwd"},
    {64, 9216, 128, 'N', 'N', "downpour.fc1.dx"},
    {128, 9216, 64, 'T', 'N', "downpour.fc1.dw"},
    /* resnet18-cifar 3x3 convs, per image */
    {64, 1024, 27, 'N', 'N', "resnet18.stem.fwd"},
    {64, 1024, 576, 'N', 'N', "resnet18.s1.fwd"},
    {128, 256, 1152, 'N', 'N', "resnet18.s2.fwd"},
    {256, 64, 2304, 'N', 'N', "resnet18.s3.fwd"},
    {512, 16, 4608, 'N', 'N', "resnet18.s4.fwd"},
    {512, 4608, 16, 'N', 'T', "resnet18.s4.dw"},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *alloc_fill(size_t n, unsigned *seed)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) {
        fprintf(stderr, "sgemm_peak: out of memory (%zu floats)\n", n);
        exit(1);
    }
    float *f = p;
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        f[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return f;
}

/* Runs op(A)*op(B) repeatedly for at least min_time seconds (after one
 * untimed call) and returns GFLOP/s. */
static double bench_shape(const struct shape *s, double min_time)
{
    unsigned seed = 12345u;
    size_t m = (size_t)s->m, n = (size_t)s->n, k = (size_t)s->k;
    float *a = alloc_fill(m * k, &seed);
    float *b = alloc_fill(k * n, &seed);
    float *c = alloc_fill(m * n, &seed);
    enum CBLAS_TRANSPOSE ta = s->ta == 'T' ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = s->tb == 'T' ? CblasTrans : CblasNoTrans;
    int lda = s->ta == 'T' ? s->m : s->k;
    int ldb = s->tb == 'T' ? s->k : s->n;
    int ldc = s->n;

    cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);

    long reps = 0, batch = 1;
    double t0 = now(), t = 0.0;
    while (t < min_time) {
        for (long r = 0; r < batch; r++)
            cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c,
                        ldc);
        reps += batch;
        t = now() - t0;
        if (batch < (1L << 20))
            batch *= 2;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * (double)m * (double)n * (double)k * (double)reps / t * 1e-9;
}

static int parse_shape(const char *arg, struct shape *s)
{
    char ta = 'N', tb = 'N';
    int m, n, k, used = 0;
    if (sscanf(arg, "%dx%dx%d%n", &m, &n, &k, &used) != 3)
        return -1;
    const char *rest = arg + used;
    if (*rest == ':') {
        if (strlen(rest) != 3)
            return -1;
        ta = rest[1];
        tb = rest[2];
        if (ta == 't')
            ta = 'T';
        if (ta == 'n')
            ta = 'N';
        if (tb == 't')
            tb = 'T';
        if (tb == 'n')
            tb = 'N';
        if ((ta != 'N' && ta != 'T') || (tb != 'N' && tb != 'T'))
            return -1;
    } else if (*rest != '\0') {
        return -1;
    }
    if (m < 1 || n < 1 || k < 1)
        return -1;
    s->m = m;
    s->n = n;
    s->k = k;
    s->ta = ta;
    s->tb = tb;
    s->name = "cmdline";
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sgemm_peak [--min-time SEC] [--peak N] [--no-shapes] [MxNxK[:AB]...]\n"
               "  A,B in {N,T}: transpose flags of the row-major A and B operands.\n"
               "  Without shapes, a built-in list of dtrain layer GEMM shapes is measured.\n");
}

int main(int argc, char **argv)
{
    double min_time = 0.2, peak_time = 0.5;
    int peak_n = 1024, no_shapes = 0, nuser = 0;
    struct shape *user = calloc((size_t)argc, sizeof *user);
    if (!user)
        return 1;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--min-time") && i + 1 < argc) {
            min_time = atof(argv[++i]);
            if (min_time > peak_time)
                peak_time = min_time;
        } else if (!strcmp(argv[i], "--peak") && i + 1 < argc) {
            peak_n = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--no-shapes")) {
            no_shapes = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            free(user);
            return 0;
        } else if (parse_shape(argv[i], &user[nuser]) == 0) {
            nuser++;
        } else {
            fprintf(stderr, "sgemm_peak: bad argument '%s'\n", argv[i]);
            usage(stderr);
            free(user);
            return 2;
        }
    }
    if (peak_n < 1 || min_time <= 0.0) {
        usage(stderr);
        free(user);
        return 2;
    }

    openblas_set_num_threads(1);
    const char *core = openblas_get_corename();
    if (!core)
        core = "unknown";
    printf("sgemm_info core=%s threads=%d config=\"%s\"\n", core, openblas_get_num_threads(),
           openblas_get_config());
    fflush(stdout);

    if (!no_shapes) {
        const struct shape *list = nuser ? user : builtin;
        int count = nuser ? nuser : (int)(sizeof builtin / sizeof builtin[0]);
        for (int i = 0; i < count; i++) {
            const struct shape *s = &list[i];
            double g = bench_shape(s, min_time);
            printf("sgemm core=%s shape=%dx%dx%d gflops=%.2f trans=%c%c name=%s\n", core, s->m, s->n,
                   s->k, g, s->ta, s->tb, s->name);
            fflush(stdout);
        }
    }

    /* best of three windows: one slow window (clock ramp-up, another process waking on this
     * core) would otherwise set the yardstick every %-of-peak figure is divided by */
    struct shape sq = {peak_n, peak_n, peak_n, 'N', 'N', "peak"};
    double g = 0;
    for (int rep = 0; rep < 3; rep++) {
        double gr = bench_shape(&sq, peak_time);
        if (gr > g) g = gr;
    }
    printf("sgemm_peak gflops=%.2f core=%s n=%d\n", g, core, peak_n);
    free(user);
    return 0;
}
