"""A local Gemini Live endpoint: Google's Live API wire protocol on 127.0.0.1.

Test and benchmark infrastructure, never imported by the server. The
server reaches it exactly as it reaches Google — ADK's ``Gemini`` model,
google-genai's live client, ``wss`` with a certificate it trusts through
``--gemini-ca-file`` — so the production model path runs end to end with
no network. See docs/gemini-live.md.

    with LocalGeminiLive(cert_dir=tmp_path) as endpoint:
        ...  # endpoint.url, endpoint.ca_file, endpoint.api_key, endpoint.records
"""

from .server import DEFAULT_API_KEY, ConnectionRecord, EndpointConfig, LocalGeminiLive
from .tls import SelfSignedCert, make_self_signed_cert

__all__ = [
    "DEFAULT_API_KEY",
    "ConnectionRecord",
    "EndpointConfig",
    "LocalGeminiLive",
    "SelfSignedCert",
    "make_self_signed_cert",
]
