"""Where an archive is: its URL and options, checked, as the two clients that reach it need them.

- ``file:///var/lib/retain/archive``, or a plain path: a local directory (made if missing);
- ``memory://``: a private temporary directory, removed when the archive is
  dropped (delta-rs's own memory store cannot share its objects with the files
  retain writes itself);
- ``s3://bucket/prefix``: any S3-compatible store; options ``endpoint``,
  ``region``, ``access_key_id``, ``secret_access_key``, ``session_token``
  (else the ``AWS_*`` environment variables), ``allow_http``, any other
  obstore ``S3Config`` key, obstore's ``client_options`` and ``retry_config``,
  and ``conditional_put`` (``etag`` unless given: Delta commits are
  create-only puts, the fence between writers).

The same store is reached by obstore (retain's data files: put create-only,
read in byte ranges) and by delta-rs (the table's log), with the same options.

Example:
    >>> Location.of("s3://retain/archive", endpoint="http://127.0.0.1:8333", region="us-east-1").table_uri
    's3://retain/archive'
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit

import obstore
from obstore.store import LocalStore, S3Store

from retain.archive._boundary import translate_errors
from retain.errors import ArchiveObjectMissing, InvalidArchive

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config

__all__ = ["DEFAULT_RETRY", "Location", "ObjectFile"]

#: obstore retries a failing request for up to 3 minutes by default; a fold should give up sooner.
DEFAULT_RETRY = {"max_retries": 3, "retry_timeout": timedelta(seconds=20),
                 "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2)}}
_CLIENT_KEYS = {"client_options", "retry_config", "allow_http"}
#: options that give an S3 store its credentials (or say it needs none), in object_store's names
_CREDENTIAL_KEYS = {"access_key_id", "aws_access_key_id", "skip_signature", "aws_skip_signature",
                    "credential_provider"}
#: environment variables object_store takes credentials from
_CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                   "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SKIP_SIGNATURE")


@dataclass
class Location:
    """One archive's store, as obstore reaches it (``store``) and as delta-rs does (``table_uri``, ``storage_options``)."""

    url: str
    store: Any
    table_uri: str
    storage_options: dict[str, str] | None = field(default=None, repr=False)
    #: the local root directory, for a local (or memory://) archive; None on S3
    local_root: Path | None = None
    _cleanup: Any = field(default=None, repr=False)

    @classmethod
    def of(cls, url: str, **options: Any) -> Location:
        """Check ``url`` and ``options`` and open the store; a local directory is made if missing.

        Raises:
            InvalidArchive: an unknown scheme, a relative file URL, an S3 URL
                without a bucket, options for a store that takes none, an option
                obstore refuses.
        """
        if isinstance(url, Path):
            url = str(url)
        if not isinstance(url, str) or not url:
            raise InvalidArchive(f"an archive URL must be a non-empty string such as 'file:///var/lib/retain' "
                                 f"(got {url!r})")
        parts = urlsplit(url)
        scheme = parts.scheme.lower() if len(parts.scheme) > 1 else ""  # "C:" is a drive, not a scheme
        if scheme in ("", "file", "memory") and options:
            raise InvalidArchive(f"options {sorted(options)} apply to s3:// archives only (got {url!r})")
        if scheme == "":
            return cls._local(url, Path(url).resolve())
        if scheme == "file":
            if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
                raise InvalidArchive(f"a file URL needs an absolute path, as in file:///var/lib/retain (got {url!r})")
            return cls._local(url, Path(unquote(parts.path)))
        if scheme == "memory":
            directory = Path(tempfile.mkdtemp(prefix="retain-archive-memory-"))
            location = cls._local(url, directory)
            location._cleanup = weakref.finalize(location, shutil.rmtree, directory, True)
            return location
        if scheme in ("s3", "s3a"):
            return cls._s3(url, parts.netloc, options)
        raise InvalidArchive(f"an archive URL must be file://, memory:// or s3:// (got {url!r})")

    @classmethod
    def _local(cls, url: str, root: Path) -> Location:
        with translate_errors(f"opening the archive directory {str(root)!r}"):
            store = LocalStore(root, mkdir=True)
        return cls(url, store, str(root), None, root)

    @classmethod
    def _s3(cls, url: str, bucket: str, options: dict[str, Any]) -> Location:
        if not bucket:
            raise InvalidArchive(f"an s3 URL names a bucket, as in s3://bucket/prefix (got {url!r})")
        conditional = str(options.pop("conditional_put", "etag"))
        config = {name: value for name, value in options.items() if name not in _CLIENT_KEYS}
        client = dict(options.get("client_options") or {})
        endpoint = str(config.get("endpoint", ""))
        if endpoint and not (_CREDENTIAL_KEYS & set(config) or any(os.environ.get(name) for name in _CREDENTIAL_ENV)):
            # Without credentials object_store falls back to the cloud's metadata endpoint, which a server of
            # one's own never has: the user would see a 403 from 169.254.169.254, naming nothing they set.
            raise InvalidArchive(f"no S3 credentials for {url!r} at {endpoint}: set AWS_ACCESS_KEY_ID and "
                                 "AWS_SECRET_ACCESS_KEY (or the access_key_id and secret_access_key options; "
                                 "skip_signature = true for a public bucket)")
        allow_http = options.get("allow_http", endpoint.startswith("http://"))
        if allow_http:
            client["allow_http"] = True
        retry = options.get("retry_config", DEFAULT_RETRY)
        try:
            # The options go to obstore as given; it checks their names and values.
            store = S3Store.from_url(url, config=cast("S3Config | None", config or None),
                                     client_options=cast("ClientConfig | None", client or None), retry_config=retry)
        except (ValueError, TypeError, obstore.exceptions.BaseError) as exc:
            raise InvalidArchive(f"cannot open {url!r} with options {sorted(options)}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else exc!r}") from exc
        # delta-rs reads the same keys (object_store's names), as strings.
        storage = {name: _text(value) for name, value in {**config, **client}.items()}
        storage["conditional_put"] = conditional
        storage.update(_retry_options(retry))
        return cls(url, store, url.rstrip("/"), storage, None)

    def put_new(self, path: str, data: bytes, what: str) -> None:
        """Store ``data`` at ``path``, create-only: an object already there is never overwritten.

        Raises:
            ArchiveObjectExists: the name is taken.
        """
        with translate_errors(what):
            obstore.put(self.store, path, data, mode="create")

    def exists(self, path: str) -> bool:
        """Whether an object is at ``path``: a stat on a local disk, a HEAD request on S3."""
        if self.local_root is not None:
            return (self.local_root / path).exists()
        try:
            with translate_errors(f"looking for {path!r}"):
                obstore.head(self.store, path)
        except ArchiveObjectMissing:
            return False
        return True

    def source(self, path: str, size: int | None = None) -> Any:
        """What pyarrow reads the object at ``path`` from: a local path, or a file object over ranged GETs."""
        if self.local_root is not None:
            return str(self.local_root / path)
        with translate_errors(f"opening {path!r}"):
            return ObjectFile(obstore.open_reader(self.store, path, size=size), path)

    def get(self, path: str) -> bytes:
        """The whole object at ``path``."""
        with translate_errors(f"reading {path!r}"):
            return bytes(obstore.get(self.store, path).bytes())

    def delete(self, path: str, what: str) -> None:
        """Remove the object at ``path`` (one already gone, a rival cleaner's doing, is no error)."""
        try:
            with translate_errors(what):
                obstore.delete(self.store, path)
        except ArchiveObjectMissing:
            pass

    def listing(self, prefix: str | None = None, *, offset: str | None = None) -> list[dict[str, Any]]:
        """Every object under ``prefix`` (its ``path``, ``size`` and ``last_modified``), after ``offset`` if given,
        in no set order."""
        with translate_errors(f"listing {prefix or 'the archive'!r}"):
            return [dict(item) for item in obstore.list(self.store, prefix, offset=offset).collect()]

    def folders(self) -> list[str]:
        """The names of the folders at the root."""
        with translate_errors("listing the archive's folders"):
            listed = obstore.list_with_delimiter(self.store)
        return [prefix.rstrip("/") for prefix in listed["common_prefixes"]]


class ObjectFile:
    """An obstore reader as the file object pyarrow expects (it asks for ``closed``)."""

    def __init__(self, reader: Any, path: str) -> None:
        self._reader, self.path = reader, path
        self.closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        with translate_errors(f"reading {self.path!r}"):
            return bytes(self._reader.read(size) if size >= 0 else self._reader.read())

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._reader.seek(offset, whence))

    def tell(self) -> int:
        return int(self._reader.tell())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._reader.close()


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    return str(value)


def _retry_options(retry: Any) -> dict[str, str]:
    """obstore's retry config as delta-rs's storage options (it takes the count and the overall timeout)."""
    found: dict[str, str] = {}
    if isinstance(retry, dict):
        if "max_retries" in retry:
            found["max_retries"] = str(retry["max_retries"])
        if "retry_timeout" in retry:
            found["retry_timeout"] = _text(retry["retry_timeout"])
    return found
