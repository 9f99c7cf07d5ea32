/* A model by name or by spec file, for the trainer and for the tools that plan, size or
 * describe one (plan_tune.c, the CLI's bench, info and sweep costs): on its own so that those
 * need not depend on the trainer's set-up. */
#include <string.h>
#include <sys/stat.h>

#include "trainer/trainer.h"

dt_status dt_model_open(const char *name_or_path, dt_model **out) {
    struct stat sb;
    if (strchr(name_or_path, '/') || strstr(name_or_path, ".spec") ||
        (stat(name_or_path, &sb) == 0 && S_ISREG(sb.st_mode)))
        return dt_model_from_file(name_or_path, out);
    return dt_model_from_name(name_or_path, out);
}
