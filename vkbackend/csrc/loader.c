/* Opens libvulkan at run time and fills the dispatch table of dispatch.c. Global functions come from
 * vkGetInstanceProcAddr(NULL, ...), everything else from the instance: device-level functions then go through the
 * loader's trampolines, which serve every device of the instance. */
#include <dlfcn.h>

static void *vkb_library;
static PFN_vkGetInstanceProcAddr vkb_get_instance_proc_addr;

int vkb_open_library(const char *path, char *err, size_t errlen) {
    static const char *defaults[] = {"libvulkan.so.1", "libvulkan.so", NULL};
    const char *single[] = {path, NULL};
    const char **names = (path && path[0]) ? single : defaults;
    if (vkb_library) return 0;
    err[0] = 0;
    for (int i = 0; names[i]; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) { snprintf(err, errlen, "%s", dlerror()); continue; }
        PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
        if (!gipa) { snprintf(err, errlen, "%s has no vkGetInstanceProcAddr", names[i]); dlclose(lib); continue; }
        vkb_library = lib;
        vkb_get_instance_proc_addr = gipa;
        for (int f = 0; f < VKB_FN_COUNT; f++)
            if (vkb_fn_info[f].global) vkb_fn_table[f] = (PFN_vkVoidFunction)gipa(NULL, vkb_fn_info[f].name);
        return 0;
    }
    return -1;
}

int vkb_library_loaded(void) { return vkb_library != NULL; }

/* Resolves every function through the instance. Returns how many required (non-extension) functions are missing
 * and lists their names, space-separated, in `missing`. */
int vkb_load_instance_functions(VkInstance instance, char *missing, size_t capacity) {
    int count = 0;
    size_t used = 0;
    if (capacity) missing[0] = 0;
    for (int f = 0; f < VKB_FN_COUNT; f++) {
        if (vkb_fn_info[f].global) continue;
        vkb_fn_table[f] = (PFN_vkVoidFunction)vkb_get_instance_proc_addr(instance, vkb_fn_info[f].name);
        if (vkb_fn_table[f] || vkb_fn_info[f].optional) continue;
        count++;
        int n = used < capacity ? snprintf(missing + used, capacity - used, "%s%s", used ? " " : "", vkb_fn_info[f].name) : 0;
        if (n > 0) used += (size_t)n;
    }
    return count;
}

int vkb_function_count(void) { return VKB_FN_COUNT; }

int vkb_function_index(const char *name) {
    for (int f = 0; f < VKB_FN_COUNT; f++) if (strcmp(name, vkb_fn_info[f].name) == 0) return f;
    return -1;
}

const char *vkb_function_name(int fn) { return (fn >= 0 && fn < VKB_FN_COUNT) ? vkb_fn_info[fn].name : ""; }

int vkb_function_returns_result(int fn) { return fn >= 0 && fn < VKB_FN_COUNT && vkb_fn_info[fn].result; }

uint64_t vkb_success_count(int fn) {
    return (fn >= 0 && fn < VKB_FN_COUNT) ? __atomic_load_n(&vkb_fn_successes[fn], __ATOMIC_RELAXED) : 0;
}
