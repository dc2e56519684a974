"""Hypothesis profiles for the whole suite, chosen by HYPOTHESIS_PROFILE.

``dev`` (the default) is Hypothesis's own: random examples, so local runs keep
exploring. ``ci`` is derandomized (the same examples on every run, so a
change, not luck, turns CI red), without a deadline (a loaded 2-core runner
is not a slow kernel), and prints the blob that reproduces a failure.
A test's own ``@settings`` still overrides what it names (e.g. max_examples).
"""

import os

from hypothesis import settings

settings.register_profile("dev", settings.get_profile("default"))
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
