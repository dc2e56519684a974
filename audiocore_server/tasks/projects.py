"""Projects: a task may name one, a directory under ``acp_projects_root``.

Its delegation to the ACP agent runs there (the session's ``cwd``, one
session per owner, agent and project, resumed there), and the agent's file
requests are served inside it. A name is one or more components separated
by "/", each of letters, digits, "_", "-" and "." not at its start: no
absolute path, no "..", nothing hidden; the directory must exist, and once
resolved (symbolic links followed) still be under the root, so a link
inside the root cannot lead the agent out of it.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_PROJECT_CHARS = 200
_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


class ProjectError(ValueError):
    """A project name that cannot be used (the message says why)."""


def check_name(name: object) -> str:
    """``name`` if it is a well-formed project name, else ``ProjectError``."""
    if not isinstance(name, str):
        raise ProjectError(f"project: expected a name, got {type(name).__name__}")
    if not 0 < len(name) <= MAX_PROJECT_CHARS:
        raise ProjectError(
            f"project: expected 1 to {MAX_PROJECT_CHARS} characters, got {len(name)}"
        )
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise ProjectError(
            f"project: expected a name under the projects root, got the absolute path {name!r}"
        )
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise ProjectError(
                f"project: expected a name without empty, '.' or '..' parts, got {name!r}"
            )
        if not _COMPONENT.fullmatch(part):
            raise ProjectError(
                f"project: expected letters, digits, '_', '-' and '.' (not first), got {name!r}"
            )
    return name


def project_dir(root: Path | None, name: object) -> Path:
    """The directory of project ``name`` under ``root`` (resolved), or
    ``ProjectError`` saying why there is none."""
    checked = check_name(name)
    if root is None:
        raise ProjectError("project: this server has no projects (acp_projects_root is not set)")
    base = root.resolve()
    path = (base / checked).resolve()
    if not path.is_relative_to(base) or path == base:
        raise ProjectError(f"project: {checked!r} leads out of the projects root")
    if not path.is_dir():
        raise ProjectError(f"project: no project {checked!r} (not a directory under the root)")
    return path
