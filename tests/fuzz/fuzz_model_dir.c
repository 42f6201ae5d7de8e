/* fuzz_model_path(): see fuzz_common.h. */
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "fuzz_common.h"

static char model_dir[64];
static char model_path[128];

static void remove_model_dir(void)
{
    rmdir(model_dir);
}

const char *fuzz_model_path(void)
{
    if (model_path[0])
        return model_path;
    snprintf(model_dir, sizeof model_dir, "/tmp/llmc-fuzz-XXXXXX");
    if (!mkdtemp(model_dir)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(remove_model_dir);
    snprintf(model_path, sizeof model_path, "%s/model.onnx", model_dir);
    return model_path;
}
