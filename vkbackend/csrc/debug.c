/* The debug-utils callback: validation messages are appended to a bounded buffer under a mutex. Python
 * (tests, VKBACKEND_DEBUG) takes them; nothing runs Python on the driver's threads. */
#include <pthread.h>

static pthread_mutex_t vkb_debug_lock = PTHREAD_MUTEX_INITIALIZER;
static char vkb_debug_text[1 << 16];
static size_t vkb_debug_used;

static VKAPI_ATTR VkBool32 VKAPI_CALL vkb_debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
        VkDebugUtilsMessageTypeFlagsEXT types, const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types; (void)user;
    pthread_mutex_lock(&vkb_debug_lock);
    size_t room = sizeof(vkb_debug_text) - vkb_debug_used;
    if (room > 1) {
        int n = snprintf(vkb_debug_text + vkb_debug_used, room, "[%s] %s\n",
                         severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
                         data && data->pMessage ? data->pMessage : "");
        vkb_debug_used += (n > 0 && (size_t)n < room) ? (size_t)n : room - 1;
    }
    pthread_mutex_unlock(&vkb_debug_lock);
    return VK_FALSE;
}

int vkb_debug_messenger_create(VkInstance instance, VkDebugUtilsMessengerEXT *messenger) {
    VkDebugUtilsMessengerCreateInfoEXT info = {0};
    info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    info.pfnUserCallback = vkb_debug_callback;
    return vkCreateDebugUtilsMessengerEXT(instance, &info, NULL, messenger);
}

size_t vkb_debug_take_messages(char *out, size_t capacity) {
    pthread_mutex_lock(&vkb_debug_lock);
    size_t n = vkb_debug_used < capacity ? vkb_debug_used : capacity;
    memcpy(out, vkb_debug_text, n);
    vkb_debug_used = 0;
    pthread_mutex_unlock(&vkb_debug_lock);
    return n;
}
