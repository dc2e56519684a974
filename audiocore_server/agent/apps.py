"""The apps the server serves: the user's ADK agents, loaded as ADK loads
them, or the demo agent.

* ``--agents-dir DIR``: every subfolder of ``DIR`` that ADK's own loader
  (``google.adk.cli.utils.agent_loader.AgentLoader``, the one ``adk web`` and
  ``adk api_server`` use, with its ``.env`` handling) takes for an agent is an
  app named after the folder, exposing ``root_agent`` (or an ADK ``App`` as
  ``app``);
* ``--agent module:attr``: one app, the agent (or ``App``) at ``attr`` of the
  importable ``module``, named after the agent (or the ``App``);
* neither: the demo agent, under ``Settings.app_name``.

Whatever cannot be served stops the server at start (``AppLoadError``): an
import or syntax error (the message names the file and line), a folder
without ``root_agent``, an object that is no agent, two apps of one name.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import traceback
import warnings
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from google.adk.agents import BaseAgent
from google.adk.apps.app import App
from google.adk.plugins.base_plugin import BasePlugin

from ..tools.user_tools import static_names
from .user_agent import walk

# ADK's rule for app names (google.adk.apps.app.validate_app_name), which
# also keeps a name safe in a URL path and a log line.
_APP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_LOADER_PREFIX = re.compile(r"^Fail to load '[^']*' (module|config)\. ")
_NAME_RULE = "a letter, then letters, digits or _; not 'user'"
_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class AppLoadError(ValueError):
    """An app that cannot be served: the server does not start."""


@dataclasses.dataclass(frozen=True)
class LoadedApp:
    """One app: its name (what every surface selects it by), its root agent
    as the user wrote it, the ADK plugins declared with it, and where it
    came from (for messages)."""

    name: str
    root_agent: BaseAgent
    plugins: Sequence[BasePlugin] = ()
    origin: str = ""


def load_apps(agents_dir: Path | None, references: Sequence[str]) -> list[LoadedApp]:
    """The user's apps: those of ``agents_dir`` (sorted by name), then one per
    ``module:attr`` reference. Raises ``AppLoadError``."""
    apps: list[LoadedApp] = []
    if agents_dir is not None:
        apps.extend(_load_dir(agents_dir))
    for reference in references:
        apps.append(_load_reference(reference))
    seen: dict[str, LoadedApp] = {}
    for app in apps:
        twin = seen.get(app.name)
        if twin is not None:
            raise AppLoadError(f"two apps are named {app.name!r}: {twin.origin} and {app.origin}")
        seen[app.name] = app
    return apps


def _load_dir(agents_dir: Path) -> list[LoadedApp]:
    from google.adk.cli.utils.agent_loader import AgentLoader

    if not agents_dir.is_dir():
        raise AppLoadError(f"agents_dir: {agents_dir} is not a directory")
    loader = AgentLoader(str(agents_dir))
    names = loader.list_agents()
    if not names:
        raise AppLoadError(
            f"agents_dir: {agents_dir} holds no agent (expected subfolders with an "
            "agent.py defining root_agent, as `adk web` reads them)"
        )
    apps = []
    for name in names:
        origin = str(Path(loader.agents_dir) / name)
        if not _APP_NAME.match(name):
            raise AppLoadError(
                f"{origin}: {name!r} is not an app name (a letter, then [A-Za-z0-9_])"
            )
        try:
            with warnings.catch_warnings():
                # ADK warns that its loader's YAML fallback is experimental,
                # on every folder without root_agent: not the user's news.
                warnings.filterwarnings("ignore", r"\[EXPERIMENTAL\]", UserWarning)
                loaded = loader.load_agent(name)
        except Exception as exc:  # the user's code: any error, told with its place
            raise AppLoadError(_where(exc, Path(loader.agents_dir), origin)) from None
        apps.append(_app_of(name, loaded, origin))
    return apps


def _resolve(reference: str, what: str) -> object:
    """The object ``module:attr`` names (``what``: the setting, for the
    messages). Raises ``AppLoadError``."""
    if not _REFERENCE.match(reference):
        raise AppLoadError(f"{what}: expected module:attribute, got {reference!r}")
    module_name, attr = reference.split(":", 1)
    try:
        found: object = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except Exception as exc:  # the user's code: any error, told with its place
        raise AppLoadError(_where(exc, None, f"{what} {reference}")) from None
    return found


def _load_reference(reference: str) -> LoadedApp:
    found = _resolve(reference, "agent")
    if isinstance(found, App):
        return _app_of(found.name, found, reference)
    if isinstance(found, BaseAgent):
        return _app_of(found.name, found, reference)
    raise AppLoadError(
        f"agent {reference}: expected an ADK agent or App, got {type(found).__name__}"
    )


def _app_of(name: str, loaded: object, origin: str) -> LoadedApp:
    if not _APP_NAME.match(name) or name == "user":
        raise AppLoadError(f"{origin}: {name!r} is not an app name ({_NAME_RULE})")
    if isinstance(loaded, App):
        root = loaded.root_agent
        if not isinstance(root, BaseAgent):
            raise AppLoadError(
                f"{origin}: the App's root_agent is a {type(root).__name__}; "
                "a live conversation needs an agent (google.adk.agents.BaseAgent)"
            )
        return LoadedApp(name, root, tuple(loaded.plugins), origin)
    if not isinstance(loaded, BaseAgent):
        raise AppLoadError(
            f"{origin}: root_agent is a {type(loaded).__name__}; "
            "a live conversation needs an agent (google.adk.agents.BaseAgent)"
        )
    return LoadedApp(name, loaded, (), origin)


def _where(exc: BaseException, inside: Path | None, origin: str) -> str:
    """The error as one line, from the file and line it came from: the
    syntax error's own place, else the deepest frame of the traceback in
    ``inside`` (the agents folder) or, without one, outside Python's and
    the site packages' own files; ``origin`` when there is no such frame."""
    # ADK's loader prefixes what it re-raises; the place says it better.
    text = _LOADER_PREFIX.sub("", str(exc)).splitlines()[0] if str(exc) else ""
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: {text}"
    library = (sys.prefix, sys.base_prefix, str(Path(importlib.__file__).parent))
    place = None
    for frame in traceback.extract_tb(exc.__traceback__):
        filename = frame.filename
        if inside is not None:
            if Path(filename).resolve().is_relative_to(inside.resolve()):
                place = frame
        elif not filename.startswith(library) and not filename.startswith("<"):
            place = frame
    if place is None:
        return f"{origin}: {text}"
    return f"{place.filename}:{place.lineno}: {text}"


def check_approval_names(requiring: Collection[str], roots: Sequence[BaseAgent]) -> None:
    """``AppLoadError`` for a name in ``tools_requiring_approval`` that no
    app has a tool of — unless an app has a toolset, whose tools are known
    only once it connects."""
    names: set[str] = set()
    dynamic = False
    for root in roots:
        for agent in walk(root):
            found, some_unknown = static_names(getattr(agent, "tools", []))
            names |= found
            dynamic = dynamic or some_unknown
    unknown = sorted(set(requiring) - names)
    if unknown and not dynamic:
        raise AppLoadError(
            f"tools_requiring_approval: no tool named {', '.join(map(repr, unknown))} "
            f"(the apps' tools: {', '.join(sorted(names)) or 'none'})"
        )


def load_plugins(references: Sequence[str]) -> list[BasePlugin]:
    """``--plugin module:attr``: each an ADK plugin, or a plugin class
    taken without arguments. Raises ``AppLoadError``."""
    plugins = []
    for reference in references:
        found = _resolve(reference, "plugin")
        if isinstance(found, type) and issubclass(found, BasePlugin):
            make: Callable[[], object] = found
            try:
                found = make()
            except Exception as exc:  # the user's code: any error, told with its place
                raise AppLoadError(_where(exc, None, f"plugin {reference}")) from None
        if not isinstance(found, BasePlugin):
            raise AppLoadError(
                f"plugin {reference}: expected an ADK BasePlugin, got {type(found).__name__}"
            )
        plugins.append(found)
    return plugins
