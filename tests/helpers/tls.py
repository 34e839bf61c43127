"""TLS material for servers the tests start on 127.0.0.1."""
from __future__ import annotations

from pathlib import Path


def write_server_tls(directory: Path):
    """A fresh CA (``ca.crt``) and a certificate it signed for 127.0.0.1 and localhost (``server.crt``,
    ``server.key``) under ``directory``; returns the CA (a ``trustme.CA``) to sign more."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(directory / "server.crt")
    cert.private_key_pem.write_to_path(directory / "server.key")
    ca.cert_pem.write_to_path(directory / "ca.crt")
    return ca
