"""The mount table: which controller owns which subtree; logd owns every base path nobody mounted.

A mount file is TOML::

    logd = "127.0.0.1:7420"            # optional; --logd overrides it
    timeout = "5m"                     # optional; how long docd waits for an owner's answer

    [[mount]]
    path = "verse.ctl"                 # names separated by '.', as logd paths are written
    address = "unix:/run/verse-ctl.sock"

    [[mount]]
    path = "ci"
    address = "127.0.0.1:7501"

Every field is checked before docd connects to anything; a bad file is refused
with :class:`~retain.errors.InvalidMounts` naming the file, the ``[[mount]]``
entry (numbered from 1) and the field. Mounts do not nest: two mounts where one
path holds the other (or the same path twice) are refused, naming both.
``docs/docd.md`` describes every field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path as FsPath
from typing import Any

from retain import _fields, _toml
from retain._fields import Where
from retain.errors import InvalidInput, InvalidMounts
from retain.logd.client import Address, parse_address
from retain.logd.paths import Field, Path, parse

__all__ = ["DEFAULT_LOGD", "DEFAULT_TIMEOUT", "LOGD", "Mount", "MountTable", "load_mounts", "parse_mounts"]

#: the owner name answers give logd; a mount may not take it.
LOGD = "logd"
DEFAULT_LOGD: Address = ("127.0.0.1", 7420)
DEFAULT_TIMEOUT = 300.0  # seconds: a retain over a large container takes a while
TOP_FIELDS = ("logd", "timeout", "mount")
MOUNT_FIELDS = ("path", "address")


@dataclass(frozen=True, slots=True)
class Mount:
    """A controller owning the subtree at ``path``, reached at ``address``."""

    path: Path
    address: Address

    @property
    def name(self) -> str:
        """The mount as answers name it: its path, ``verse.ctl``."""
        return str(self.path)


@dataclass(frozen=True)
class MountTable:
    """Mounts that do not nest, and where logd is; checked when made.

    Example:
        >>> table = MountTable.of({"verse.ctl": "unix:/run/verse-ctl.sock"})
        >>> table.owner(parse("verse.ctl.runs")).name, table.owner(parse("jobs")) is None
        ('verse.ctl', True)
    """

    mounts: tuple[Mount, ...] = ()
    logd: Address = DEFAULT_LOGD
    timeout: float = DEFAULT_TIMEOUT
    #: where the table was read from, for messages
    source: str = field(default="<mounts>", compare=False)

    def __post_init__(self) -> None:
        _check_disjoint(self.mounts, lambda index: f"{self.source}: mount {self.mounts[index].name}")
        _fields.seconds(self.timeout, "timeout", Where(self.source, InvalidMounts), example="300",
                        duration_example="5m")

    @classmethod
    def of(cls, mounts: dict[str, str | Address], *, logd: str | Address = DEFAULT_LOGD,
           timeout: float = DEFAULT_TIMEOUT) -> MountTable:
        """A table from ``{path: address}``; addresses as ``HOST:PORT``, ``unix:PATH`` or already parsed."""
        made = [Mount(_mount_path(path, "mount"), _address(address, f"mount {path}")) for path, address in
                mounts.items()]
        return cls(tuple(made), _address(logd, "logd"), timeout)

    def with_logd(self, address: str | Address | None) -> MountTable:
        """This table with logd at ``address`` instead (None: unchanged), e.g. from ``--logd``."""
        if address is None:
            return self
        return replace(self, logd=_address(address, "--logd"))

    def owner(self, path: Path) -> Mount | None:
        """The mount holding ``path`` (the path itself or an ancestor of it is mounted), else None: logd."""
        for mount in self.mounts:
            if path.startswith(mount.path):
                return mount
        return None

    def beneath(self, path: Path) -> tuple[Mount, ...]:
        """The mounts strictly inside ``path``'s subtree, in table order."""
        return tuple(mount for mount in self.mounts
                     if mount.path.startswith(path) and mount.path != path)


def load_mounts(path: str | FsPath) -> MountTable:
    """Read and check the mount file at ``path``.

    Raises:
        InvalidMounts: the file cannot be read, is not TOML, or a field is wrong;
            the message names the file, the entry and the field.
    """
    text = _toml.read(path, "mount", InvalidMounts)
    return parse_mounts(text, source=str(path))


def parse_mounts(text: str, source: str = "<string>") -> MountTable:
    """Check the TOML ``text`` of a mount file; ``source`` names it in messages.

    Example:
        >>> parse_mounts('[[mount]]\\npath = "verse.ctl"\\naddress = "127.0.0.1:7501"').mounts[0].name
        'verse.ctl'
    """
    document = _toml.decode(text, source, InvalidMounts)
    where = Where(source, InvalidMounts)
    _fields.refuse_unknown(document, TOP_FIELDS, where)
    logd = _address(document["logd"], where.field("logd")) if "logd" in document else DEFAULT_LOGD
    timeout = _fields.seconds(document.get("timeout", DEFAULT_TIMEOUT), "timeout", where, example="300",
                              duration_example="5m")
    tables = document.get("mount", [])
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise InvalidMounts(f"{source}: 'mount' must be [[mount]] tables, each with path and address")
    mounts = tuple(_mount(table, where.entry("mount", number, _label(table)))
                   for number, table in enumerate(tables, start=1))
    _check_disjoint(mounts, lambda index: str(where.entry("mount", index + 1, _label(tables[index]))))
    return MountTable(mounts, logd, timeout, source)


def _label(table: dict[str, Any]) -> str:
    return table["path"] if isinstance(table.get("path"), str) else ""


def _mount(table: dict[str, Any], where: Where) -> Mount:
    _fields.refuse_unknown(table, MOUNT_FIELDS, where)
    for name in MOUNT_FIELDS:
        if name not in table:
            raise InvalidMounts(f"{where.field(name)}: missing: a mount is a path and the address "
                                "of the controller that owns it")
    return Mount(_mount_path(table["path"], where.field("path")), _address(table["address"], where.field("address")))


def _mount_path(text: object, where: str) -> Path:
    """A mount point: names separated by '.', never 'logd' itself."""
    try:
        path = parse(text)  # type: ignore[arg-type]
    except InvalidInput as exc:
        raise InvalidMounts(f"{where}: {exc}") from exc
    # A mount point is the root of its controller's tree, a map: only names lead to it.
    odd = [segment for segment in path.segments if not isinstance(segment, Field)]
    if odd:
        raise InvalidMounts(f"{where}: {text!r}: a mount point is names separated by '.', such as verse.ctl "
                            f"(found {str(odd[0]).lstrip('.')!r})")
    if str(path) == LOGD:
        raise InvalidMounts(f"{where}: {text!r}: answers name logd itself 'logd'; mount the controller elsewhere")
    return path


def _address(value: object, where: str) -> Address:
    if isinstance(value, tuple):
        return value
    if not isinstance(value, str):
        raise InvalidMounts(f"{where}: must be a string, HOST:PORT or unix:PATH (got {value!r})")
    try:
        return parse_address(value)
    except InvalidInput:
        raise InvalidMounts(f"{where}: an address is HOST:PORT or a socket path such as unix:/run/ctl.sock "
                            f"(got {value!r})") from None


def _check_disjoint(mounts: Iterable[Mount], label: Callable[[int], str]) -> None:
    """Refuse a path mounted twice, or one mount inside another, naming both."""
    mounts = tuple(mounts)
    for later, mount in enumerate(mounts):
        for earlier in range(later):
            other = mounts[earlier]
            if mount.path == other.path:
                raise InvalidMounts(f"{label(later)}: mounts {mount.name} again (as {label(earlier)} does): "
                                    "a path has one owner")
            if mount.path.startswith(other.path) or other.path.startswith(mount.path):
                outer, inner = (other, mount) if mount.path.startswith(other.path) else (mount, other)
                raise InvalidMounts(f"{label(later)}: {inner.name} lies inside {outer.name} "
                                    f"({label(earlier)}): mounts do not nest")
