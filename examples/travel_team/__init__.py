# ADK's loader (adk web, --agents-dir) imports the package: this brings in
# agent.py and its root_agent.
from . import agent  # noqa: F401
