"""A self-signed certificate for 127.0.0.1, made when it is needed.

google-genai always connects to the Live API with ``wss`` (it rewrites any
scheme of the base URL), so the local endpoint has to serve TLS. The
certificate is generated into a temporary directory at run time and never
committed; a client trusts it by loading ``cert_file`` as its CA (the
server's ``--gemini-ca-file``, or genai's ``SSL_CERT_FILE``).
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclasses.dataclass(frozen=True)
class SelfSignedCert:
    cert_file: Path  # PEM certificate: also the CA a client must trust
    key_file: Path  # PEM private key (unencrypted; test material only)

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert_file))


def make_self_signed_cert(folder: Path) -> SelfSignedCert:
    """A fresh key and a certificate valid for 127.0.0.1 and localhost (one day)."""
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "audiocore local Gemini Live")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        # A self-signed leaf that is its own CA: what ssl's default context
        # verifies against when this file is given as cafile.
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "local-gemini-live.pem", folder / "local-gemini-live.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_file.chmod(0o600)
    return SelfSignedCert(cert_file, key_file)
