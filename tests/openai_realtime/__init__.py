"""A local OpenAI Realtime endpoint: the GA Realtime API's events on 127.0.0.1.

Test and benchmark infrastructure, never imported by the server. The server
reaches it exactly as it reaches OpenAI — the ``openai`` package's realtime
client, ``wss`` with a certificate it trusts through ``--openai-ca-file`` —
so the production model path runs end to end with no network. See
docs/providers.md.

    with LocalOpenAIRealtime(cert_dir=tmp_path) as endpoint:
        ...  # endpoint.base_url, endpoint.ca_file, endpoint.api_key, endpoint.records
"""

from .server import DEFAULT_API_KEY, ConnectionRecord, EndpointConfig, LocalOpenAIRealtime

__all__ = ["DEFAULT_API_KEY", "ConnectionRecord", "EndpointConfig", "LocalOpenAIRealtime"]
