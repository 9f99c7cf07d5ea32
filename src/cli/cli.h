/* The subcommands of dtrain, one a file (cmd_*.c), and what they share. */
#ifndef DT_CLI_H
#define DT_CLI_H

#include "dtrain.h"

#define NOPTS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* "dtrain: error: " and the last error on stderr; returns exit status 2. */
int dt_cli_fail(void);
/* A subcommand's flag prologue, for one flag table: argv's flags from `first` on read into
 * list's base; -1 to go on, else the exit status (0: --help printed with usage, 2: an error
 * said) */
struct dt_flag_list;
int dt_cli_flags(const char *cmd, int argc, char **argv, int first, const struct dt_flag_list *list, const char *usage);
/* The exit status of a run stopped on request (SIGTERM, SIGINT) whose checkpoint holds it:
 * a job script requeues on it (examples/slurm/) */
#define DT_EXIT_STOPPED 5

/* The model a weights file is used with (eval, sample): --model when given (refused when it is
 * not the file's), else the one the file names, else cnn1 (files of older builds name none). */
dt_status dt_weights_model(const char *cmd, const char *model, const char *weights, const dt_weights_meta *w, dt_model **m);

int dt_cmd_train(int argc, char **argv);
int dt_cmd_sample(int argc, char **argv);
int dt_cmd_run(int argc, char **argv);
int dt_cmd_sim(int argc, char **argv);
/* cmd_sim.c: dtrain sim's own flags (not train's), n of them */
struct dt_flag;
const struct dt_flag *dt_sim_own_flags(int *n);
int dt_cmd_eval(int argc, char **argv);
int dt_cmd_info(int argc, char **argv);
int dt_cmd_bench(int argc, char **argv);
int dt_cmd_tune(int argc, char **argv);
/* cmd_calibrate.c: dtrain sim calibrate (dt_cmd_sim passes it on); calib_rank.c: its ranks */
int dt_cmd_sim_calibrate(int argc, char **argv);
int dt_cmd_sim_calibrate_rank(int argc, char **argv);
/* cmd_bench.c: steps training steps of model on random data (batch examples, SGD), after
 * warmup untimed ones: each step's seconds into secs (steps of them), and the model's forward
 * FLOPs an example */
dt_status dt_bench_time_steps(const char *model, int batch, int warmup, int steps, double *secs, double *fwd_flops);
/* ... the same model kept, for a caller that times its steps beside something else (dtrain sim
 * calibrate: the steps with a sum crossing and without) */
typedef struct dt_bench_rig dt_bench_rig;
dt_status dt_bench_rig_new(const char *model, int batch, dt_bench_rig **out);
void dt_bench_rig_steps(dt_bench_rig *g, int n);
void dt_bench_rig_free(dt_bench_rig *g);
int dt_cmd_diff(int argc, char **argv);

#endif
