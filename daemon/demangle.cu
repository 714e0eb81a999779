/* C++ symbol demangling for CUPTI kernel names, behind a C name (the daemon
 * is C; libstdc++'s abi::__cxa_demangle does the work). Host code only. */
#include <cxxabi.h>
#include <cstdlib>

/* Returns the demangled name (new, free()) or NULL when name is not a valid
 * mangled name or memory ran out. */
extern "C" char *lmperf_demangle(const char *mangled)
{
    int status = 0;
    char *out = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    if (status != 0) {
        std::free(out);
        return nullptr;
    }
    return out;
}
