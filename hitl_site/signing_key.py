"""The demo's audit signing key: made on first run, so that `hitl_audit receipt` works in a
demo nobody configured. A real project reads its key from the environment or a secrets
store (docs/audit.md) and never writes one next to its code."""

import os
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat


def demo_signing_key(path: Path) -> str:
    """The PEM text of the Ed25519 key at `path`, generated there if there is none.

    `make demo` starts the server and hitl_periodic at once: each may find no key, so each
    writes its own to a file of its own and links it into place; the first link wins and
    both read the winner's key."""
    if not path.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
        )
        descriptor, draft = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(draft)
    return path.read_text(encoding="ascii")
