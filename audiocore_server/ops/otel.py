"""OpenTelemetry for the ``audiocore-server`` command: configured by the
standard ``OTEL_*`` environment variables, off without them.

``configure_from_env`` hands the environment to ADK's own setup
(``google.adk.telemetry.setup.maybe_set_otel_providers``), which sets the
global providers only when an OTLP endpoint is named
(``OTEL_EXPORTER_OTLP_ENDPOINT``, or ``…_TRACES_ENDPOINT``,
``…_METRICS_ENDPOINT``, ``…_LOGS_ENDPOINT``), with the resource from
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` — so our spans and
ADK's go to the same collector in one trace. Without one nothing is set, and
no span is made (``turn_timing.tracing_on``). An app that embeds the server
configures OpenTelemetry itself; this is not called there.
"""

from __future__ import annotations

import os

ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
)


def configure_from_env() -> bool:
    """Set the global OpenTelemetry providers from the environment; True if
    an endpoint is named (and so the providers are set)."""
    if not any(os.environ.get(name) for name in ENDPOINTS):
        return False
    from google.adk.telemetry.setup import maybe_set_otel_providers

    maybe_set_otel_providers()
    return True
