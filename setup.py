"""Builds the compiled parts of audiocore; metadata lives in pyproject.toml.

Our C (audiocore/src) is compiled once, with warnings as errors, and linked
into the extensions; the C that Cython generates is compiled with the same
optimisation but without -Werror, since its warnings are Cython's.  Release
builds carry no debug information.

AUDIOCORE_DEBUG=1 builds with Cython's bounds checks back on, no
optimisation, and AddressSanitizer + UBSan (load libasan with LD_PRELOAD
when running the tests against such a build).  AUDIOCORE_WERROR=0 keeps
our warnings non-fatal, for a compiler newer than the ones CI runs.
"""

import os
from glob import glob

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("AUDIOCORE_DEBUG") == "1"
WERROR = os.environ.get("AUDIOCORE_WERROR", "1") != "0"
C_DIR = "audiocore/src"

# One extension per concern; every one links the shared SIMD dispatch.
EXTENSIONS = {
    "audiocore._aec": ["aec.c", "aec_align.c", "aec_mac.c", "fft.c"],
    "audiocore._convert": ["convert.c", "g711.c"],
    "audiocore._jitter": ["jitter.c", "jb_ring.c", "jb_conceal.c", "jb_delay.c"],
    "audiocore._resample": ["resample.c", "g711.c"],
}

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "embedsignature": True,
    "autotestdict": False,  # no __test__ dict: stubs list the real API only
}

GCC_FLAGS = (
    ["-std=c11", "-O0", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined"]
    if DEBUG
    # No -ffast-math: the kernels rely on IEEE NaN and rounding semantics.
    # -g0 overrides the -g in Python's own CFLAGS: the wheel ships no debug
    # information (it was seven times the code).
    else ["-std=c11", "-O3", "-fno-math-errno", "-fno-trapping-math", "-g0"]
)
GCC_STRICT = ["-Wall", "-Wextra", *(["-Werror"] if WERROR else [])]
# MSVC: no CI here builds with it, and /W3 already flags getenv as unsafe
# (C4996), so its warnings are shown but not fatal.
MSVC_FLAGS = ["/O2"]
MSVC_STRICT = ["/W3"]


class BuildExt(build_ext):
    """Compiles our C once with strict flags, Cython's C without them, and
    spells both for the compiler family at hand."""

    def build_extensions(self):
        msvc = self.compiler.compiler_type == "msvc"
        flags, strict = (MSVC_FLAGS, MSVC_STRICT) if msvc else (GCC_FLAGS, GCC_STRICT)
        ours = sorted({s for ext in self.extensions for s in ext.sources if s.startswith(C_DIR)})
        objects = self.compiler.compile(
            ours,
            output_dir=self.build_temp,
            include_dirs=[C_DIR],
            extra_postargs=[*flags, *strict],
            debug=self.debug,
        )
        object_of = dict(zip(ours, objects, strict=True))
        headers = glob(f"{C_DIR}/*.h")
        for ext in self.extensions:
            mine = [s for s in ext.sources if s in object_of]
            ext.sources = [s for s in ext.sources if s not in object_of]
            ext.extra_objects = [object_of[s] for s in mine]
            ext.depends = [*ext.depends, *mine, *headers]  # relink when our C changes
            ext.extra_compile_args = list(flags)
            ext.extra_link_args = [] if msvc or not DEBUG else ["-fsanitize=address,undefined"]
        super().build_extensions()


extensions = [
    Extension(
        name,
        [
            name.replace(".", "/") + ".pyx",
            *(f"{C_DIR}/{source}" for source in sources),
            f"{C_DIR}/simd.c",
        ],
        include_dirs=[C_DIR],
    )
    for name, sources in EXTENSIONS.items()
]

setup(
    # Always regenerate: the directives (debug or not) are not part of
    # Cython's up-to-date check.
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, force=True),
    cmdclass={"build_ext": BuildExt},
)
