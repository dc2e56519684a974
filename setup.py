"""Builds the compiled parts of audiocore; metadata lives in pyproject.toml.

AUDIOCORE_DEBUG=1 builds with Cython's bounds checks back on, no
optimisation, and AddressSanitizer + UBSan (load libasan with LD_PRELOAD
when running the tests against such a build).
"""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("AUDIOCORE_DEBUG") == "1"

# One extension per concern; every one links the shared SIMD dispatch.
EXTENSIONS = {
    "audiocore._convert": ["audiocore/src/convert.c"],
    "audiocore._jitter": [
        "audiocore/src/jitter.c",
        "audiocore/src/jb_ring.c",
        "audiocore/src/jb_conceal.c",
        "audiocore/src/jb_delay.c",
    ],
    "audiocore._resample": ["audiocore/src/resample.c"],
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
    ["-O0", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined"]
    if DEBUG
    # No -ffast-math: the kernels rely on IEEE NaN and rounding semantics.
    else ["-O3", "-fno-math-errno", "-fno-trapping-math"]
)


class BuildExt(build_ext):
    """Picks flags by compiler family, since MSVC spells them differently."""

    def build_extensions(self):
        msvc = self.compiler.compiler_type == "msvc"
        for ext in self.extensions:
            ext.extra_compile_args = ["/O2"] if msvc else ["-std=c11", *GCC_FLAGS]
            ext.extra_link_args = [] if msvc or not DEBUG else ["-fsanitize=address,undefined"]
        super().build_extensions()


extensions = [
    Extension(
        name,
        [name.replace(".", "/") + ".pyx", *sources, "audiocore/src/simd.c"],
        include_dirs=["audiocore/src"],
    )
    for name, sources in EXTENSIONS.items()
]

setup(
    # Always regenerate: the directives (debug or not) are not part of
    # Cython's up-to-date check.
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, force=True),
    cmdclass={"build_ext": BuildExt},
)
