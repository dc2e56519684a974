"""The files and metadata of audiocore-server, taken from the repository.

The server's package and the demo page live at the repository's root beside
the audiocore core; this project, two levels down, takes them from there
(or, built from its sdist, from its own root, where the sdist put them). Its
version is audiocore's ``__version__`` and its dependencies the root
pyproject's ``server`` group plus audiocore of that version: one copy of
each. (From an sdist, hatchling reads both from PKG-INFO and runs no
metadata hook.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import tomllib
from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface


def _sources(root: str) -> Path:
    """The directory holding audiocore_server/ and web/."""
    here = Path(root)
    for candidate in (here, here.parent.parent):
        if (candidate / "audiocore_server" / "__init__.py").is_file():
            return candidate
    raise FileNotFoundError(
        f"expected audiocore_server/ in {here} or two levels up (a checkout), found neither"
    )


class ServerMetadata(MetadataHookInterface):
    def update(self, metadata: dict[str, Any]) -> None:
        repo = _sources(self.root)
        init = (repo / "audiocore" / "__init__.py").read_text(encoding="utf-8")
        found = re.search(r'^__version__ = "([^"]+)"$', init, re.MULTILINE)
        if found is None:
            raise ValueError('expected __version__ = "..." in audiocore/__init__.py, found none')
        groups = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
        metadata["version"] = found.group(1)
        metadata["dependencies"] = [
            f"audiocore=={found.group(1)}",
            *groups["dependency-groups"]["server"],
        ]


class ServerFiles(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        repo = _sources(self.root)
        # Installed, the page is package data (Settings.web_dir finds it
        # there); the sdist keeps the checkout's layout.
        page = "audiocore_server/web" if self.target_name == "wheel" else "web"
        build_data["force_include"].update(
            {str(repo / "audiocore_server"): "audiocore_server", str(repo / "web"): page}
        )
        # hatchling takes license files from this directory only: the
        # root's LICENSE goes into the sdist's root (where the wheel built
        # from it finds it) and, built from the checkout, beside the wheel's
        # metadata.
        if self.target_name == "sdist":
            build_data["force_include"][str(repo / "LICENSE")] = "LICENSE"
        elif repo != Path(self.root):
            build_data["extra_metadata"][str(repo / "LICENSE")] = "LICENSE"
