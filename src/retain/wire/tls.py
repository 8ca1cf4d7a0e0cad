"""TLS on both transports: a server's context from its certificate and key, a client's from what it trusts.

:func:`server_context` loads the certificate and key before anything binds, so a key that does
not match its certificate, or a file that is not PEM, fails the start with one line naming both
files -- it used to be found by uvicorn's task after "serving ... http://..." was logged, and the
server ran on without its HTTP listener.

:func:`client_context` reads a client's ``tls=`` as httpx's ``verify=`` and redis-py's
``ssl=``/``ssl_ca_certs=`` do:

- ``True``: the system's trusted CAs, the host name checked against the certificate;
- a path (``str`` or ``os.PathLike``): a PEM bundle of CAs to trust instead (a private CA, or a
  self-signed server certificate), the host name still checked;
- an :class:`ssl.SSLContext`: used as given (a client certificate, pinning, another trust);
- ``None`` or ``False``: no TLS.
"""

from __future__ import annotations

import os
import ssl

from retain.errors import InvalidInput

__all__ = ["ClientTls", "client_context", "server_context"]

#: what a client's ``tls=`` takes (see the module's docstring)
ClientTls = ssl.SSLContext | str | os.PathLike[str] | bool | None


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """A server's TLS context for the PEM certificate (chain) ``cert`` and its private key ``key``.

    Raises:
        InvalidInput: either file cannot be read, is not PEM, or the key is not the certificate's.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        # OpenSSL names a mismatch; a file that is not PEM it reports only as "PEM lib".
        why = {"KEY_VALUES_MISMATCH": "the key is not the certificate's",
               None: "a file that is not a PEM certificate or key"}.get(exc.reason, _reason(exc))
        raise InvalidInput(f"the TLS certificate {cert} and key {key} cannot serve ({why}): give a PEM "
                           f"certificate and the private key it was made with") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read the TLS certificate {cert} or key {key}: {exc.strerror or exc}") from None
    return context


def client_context(tls: ClientTls) -> ssl.SSLContext | None:
    """The context a client connects with for ``tls=`` (None: in clear).

    Raises:
        InvalidInput: ``tls`` is none of the accepted kinds, or its CA file cannot be loaded.
    """
    if tls is None or tls is False:
        return None
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls is True:
        return ssl.create_default_context()
    if isinstance(tls, (str, os.PathLike)):
        try:
            return ssl.create_default_context(cafile=os.fspath(tls))
        except (ssl.SSLError, OSError) as exc:
            raise InvalidInput(f"tls={os.fspath(tls)!r} is no CA bundle (PEM) to trust: {_reason(exc)}") from None
    raise InvalidInput(f"tls is True, a CA bundle's path, an ssl.SSLContext, or None (got {tls!r})")


def _reason(exc: OSError) -> str:
    return str(getattr(exc, "reason", None) or exc.strerror or exc)
