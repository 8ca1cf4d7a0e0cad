"""The archive's object store: segments and manifests, every object written create-only.

:class:`Archive` opens one store by URL through obstore:

- ``file:///var/lib/retain/archive``, or a plain path: a local directory (made if missing);
- ``memory://``: in this process only, for quick use and tests;
- ``s3://bucket/prefix``: any S3-compatible store; options ``endpoint``,
  ``region``, ``access_key_id``, ``secret_access_key``, ``session_token``
  (else the ``AWS_*`` environment variables), ``allow_http``, and obstore's
  ``client_options`` and ``retry_config``.

Nothing is ever overwritten. A second writer of a name fails instead
(``ArchiveObjectExists``): that is the fence between two folders racing on
one stream (INV-FENCE).

Example:
    >>> archive = Archive("s3://retain/archive", endpoint="http://127.0.0.1:8333",
    ...                   access_key_id="…", secret_access_key="…")
    >>> archive.manifest(StreamRef("codemojex", "activity")).watermark
    StreamId(ms=1789171200999, seq=0)
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit

import obstore
from obstore.store import LocalStore, MemoryStore, S3Store

from retain.archive._obstore import translate_errors
from retain.archive.layout import MANIFEST_DIR, key_of_dir, manifest_number, manifest_path, stream_dir
from retain.archive.manifest import Manifest, SegmentInfo
from retain.archive.segments import EncodedSegment, same_rows
from retain.errors import ArchiveCorrupt, ArchiveObjectExists, InvalidArchive
from retain.streams.keys import Stream, key_of

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config

__all__ = ["Archive", "DEFAULT_RETRY"]

#: obstore retries a failing request for up to 3 minutes by default; a fold should give up sooner.
DEFAULT_RETRY = {"max_retries": 3, "retry_timeout": timedelta(seconds=20),
                 "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2)}}
_CLIENT_KEYS = {"client_options", "retry_config", "allow_http"}


class _SegmentFile:
    """An obstore reader as the file object pyarrow expects (it asks for ``closed``)."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self.closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        with translate_errors("reading a segment"):
            return bytes(self._reader.read(size) if size >= 0 else self._reader.read())

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._reader.seek(offset, whence))

    def tell(self) -> int:
        return int(self._reader.tell())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._reader.close()


class Archive:
    """A store of stream archives: per stream, Parquet segments and a numbered manifest series.

    Construction validates the URL and options before any I/O (``InvalidArchive``);
    a local directory is made when it is missing. One Archive may be shared by
    threads. Errors of the store arrive as :class:`~retain.errors.ArchiveError`.
    """

    def __init__(self, url: str, **options: Any) -> None:
        if isinstance(url, Path):
            url = str(url)
        if not isinstance(url, str) or not url:
            raise InvalidArchive(f"an archive URL must be a non-empty string such as 'file:///var/lib/retain' "
                                 f"(got {url!r})")
        self.url = url
        self._latest: dict[str, Manifest] = {}
        self._lock = threading.Lock()
        self.store = self._open(url, options)

    def _open(self, url: str, options: dict[str, Any]) -> Any:
        parts = urlsplit(url)
        scheme = parts.scheme.lower() if len(parts.scheme) > 1 else ""  # "C:" is a drive, not a scheme
        if scheme in ("", "file", "memory") and options:
            raise InvalidArchive(f"options {sorted(options)} apply to s3:// archives only (got {url!r})")
        if scheme == "":
            with translate_errors(f"opening the archive directory {url!r}"):
                return LocalStore(Path(url).resolve(), mkdir=True)
        if scheme == "file":
            if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
                raise InvalidArchive(f"a file URL needs an absolute path, as in file:///var/lib/retain (got {url!r})")
            path = unquote(parts.path)
            with translate_errors(f"opening the archive directory {path!r}"):
                return LocalStore(path, mkdir=True)
        if scheme == "memory":
            return MemoryStore()
        if scheme in ("s3", "s3a"):
            return self._open_s3(url, parts.netloc, options)
        raise InvalidArchive(f"an archive URL must be file://, memory:// or s3:// (got {url!r})")

    def _open_s3(self, url: str, bucket: str, options: dict[str, Any]) -> Any:
        if not bucket:
            raise InvalidArchive(f"an s3 URL names a bucket, as in s3://bucket/prefix (got {url!r})")
        config = {name: value for name, value in options.items() if name not in _CLIENT_KEYS}
        client = dict(options.get("client_options") or {})
        endpoint = str(config.get("endpoint", ""))
        allow_http = options.get("allow_http", endpoint.startswith("http://"))
        if allow_http:
            client["allow_http"] = True
        retry = options.get("retry_config", DEFAULT_RETRY)
        try:
            # The options go to obstore as given; it checks their names and values.
            return S3Store.from_url(url, config=cast("S3Config | None", config or None),
                                    client_options=cast("ClientConfig | None", client or None), retry_config=retry)
        except (ValueError, TypeError, obstore.exceptions.BaseError) as exc:
            raise InvalidArchive(f"cannot open {url!r} with options {sorted(options)}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else exc!r}") from exc

    def __repr__(self) -> str:
        return f"Archive({self.url!r})"

    # -- manifests ------------------------------------------------------------------------------

    def manifest(self, stream: Stream) -> Manifest:
        """The current manifest of ``stream``: the highest-numbered one (number 0 if none).

        Lists only the manifests after the last one this Archive saw, so a
        steady reader pays one short listing per call.
        """
        key = key_of(stream)
        with self._lock:
            known = self._latest.get(key) or Manifest(key)
        prefix = f"{stream_dir(key)}/{MANIFEST_DIR}/"
        offset = manifest_path(key, known.number) if known.number else None
        with translate_errors(f"listing the manifests of {key!r}"):
            listed = obstore.list(self.store, prefix, offset=offset).collect()
        numbers = [number for item in listed if (number := manifest_number(item["path"])) is not None]
        highest = max(numbers, default=0)
        if highest <= known.number:
            return known
        return self._remember(self._read_manifest(key, highest))

    def manifest_at(self, stream: Stream, number: int) -> Manifest:
        """Manifest ``number`` of ``stream`` (0: the empty one), whether or not it is the highest."""
        key = key_of(stream)
        return self._remember(self._read_manifest(key, number)) if number else Manifest(key)

    def _read_manifest(self, key: str, number: int) -> Manifest:
        with translate_errors(f"reading manifest {number} of {key!r}"):
            data = obstore.get(self.store, manifest_path(key, number)).bytes()
        return Manifest.from_json(bytes(data), stream=key, number=number)

    def _remember(self, manifest: Manifest) -> Manifest:
        with self._lock:
            known = self._latest.get(manifest.stream)
            if known is None or known.number < manifest.number:
                self._latest[manifest.stream] = manifest
        return manifest

    def put_manifest(self, manifest: Manifest) -> None:
        """Write ``manifest`` under its number, create-only: the fence.

        Raises:
            ArchiveObjectExists: another writer wrote that number first; re-read
                with :meth:`manifest` and continue from its watermark.
        """
        path = manifest_path(manifest.stream, manifest.number)
        data = manifest.to_json()
        try:
            with translate_errors(f"writing manifest {manifest.number} of {manifest.stream!r}"):
                obstore.put(self.store, path, data, mode="create")
        except ArchiveObjectExists:
            # A retried request may find its own first attempt: the writer token tells them apart.
            if self._stored(path) != data:
                raise
        self._remember(manifest)

    # -- segments -------------------------------------------------------------------------------

    def put_segment(self, stream: Stream, segment: EncodedSegment) -> SegmentInfo:
        """Store ``segment`` under its name, create-only, and return its manifest line.

        A segment already stored under the name (a folder that crashed before
        its manifest, or a rival folder) is checked, never overwritten: the
        same rows are accepted as they are stored.

        Raises:
            ArchiveCorrupt: the stored segment holds other rows than ``segment``.
        """
        key = key_of(stream)
        path = f"{stream_dir(key)}/{segment.name}"
        try:
            with translate_errors(f"writing segment {segment.name} of {key!r}"):
                obstore.put(self.store, path, segment.data, mode="create")
        except ArchiveObjectExists:
            stored = self._stored(path)
            if stored != segment.data and not same_rows(stored, segment.data):
                raise ArchiveCorrupt(f"segment {segment.name} of {key!r} is already stored with other rows; "
                                     "it was left as it is") from None
            return segment.info(len(stored))
        return segment.info()

    def _stored(self, path: str) -> bytes:
        with translate_errors(f"reading {path!r}"):
            return bytes(obstore.get(self.store, path).bytes())

    def open_segment(self, stream: Stream, segment: SegmentInfo) -> _SegmentFile:
        """A file object over a stored segment that reads only the byte ranges asked for."""
        key = key_of(stream)
        with translate_errors(f"opening segment {segment.name} of {key!r}"):
            reader = obstore.open_reader(self.store, f"{stream_dir(key)}/{segment.name}", size=segment.size)
        return _SegmentFile(reader)

    def segment_path(self, stream: Stream, segment: SegmentInfo) -> str:
        """The object path of ``segment`` within the store (for tools that read it directly)."""
        return f"{stream_dir(key_of(stream))}/{segment.name}"

    def streams(self) -> list[str]:
        """The keys of every stream this archive holds a folder for, sorted."""
        with translate_errors("listing the archive's streams"):
            listed = obstore.list_with_delimiter(self.store)
        return sorted(key_of_dir(prefix.rstrip("/")) for prefix in listed["common_prefixes"])
