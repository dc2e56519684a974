# The instruction-set paths every kernel module shares (audiocore/src/simd.h),
# declared once, with the name lookups behind each module's _paths(),
# _get_path() and _set_path() (for tests and benchmarks).

cdef extern from "simd.h" nogil:
    enum:
        AC_PATH_COUNT
    int ac_path_supported(int path)
    int ac_best_path()
    const char *ac_path_name(int path)


cdef inline str path_name(int path):
    return ac_path_name(path).decode()


cdef inline list supported_paths():
    """Names of the paths this CPU can run, narrowest first."""
    return [path_name(p) for p in range(AC_PATH_COUNT) if ac_path_supported(p)]


cdef inline int path_index(str name) except -1:
    """The path called `name`; ValueError unless this CPU can run it."""
    for p in range(AC_PATH_COUNT):
        if path_name(p) == name:
            if not ac_path_supported(p):
                raise ValueError(f"path {name!r} is not supported on this CPU")
            return p
    raise ValueError(f"unknown path {name!r}; expected one of {supported_paths()}")
