"""What a confined process must keep reading to go on running, when its reads are confined.

Python imports lazily (the folder machinery, a codec, `uuid` on first use), loads shared
libraries with `dlopen` on first use (SQLite's, libpq, OpenSSL) and reads a few system files
(time zone, name resolution, certificates). Each of those must stay readable after Landlock
starts refusing reads elsewhere, so the list is built from where this interpreter actually
loads from: its prefixes, every `sys.path` entry except the working directory `-c` and `-m`
put first (it may be `$HOME`; code already imported from it is granted by its own folder
instead), the folder of
every package already imported (an editable install maps packages outside `sys.path`), and a
fixed list of system places that hold no user data.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

# Read-only system places: libraries, time zones, locales, certificates, resolver settings,
# CPU counts; and the devices and the process's own /proc entry that libc and Python read.
SYSTEM_PLACES = (
    "/lib",
    "/lib32",
    "/lib64",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/share/zoneinfo",
    "/usr/share/locale",
    "/usr/share/ca-certificates",
    "/etc/ssl",
    "/etc/pki",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/passwd",
    "/etc/group",
    "/etc/mime.types",
    "/dev/null",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/proc/self",  # resolved when the rule is added: this process's /proc/<pid>
    "/sys/devices/system/cpu",
)

# Files libpq reads at every new connection (passwords, service definitions, TLS material).
_LIBPQ_HOME = (".pgpass", ".pg_service.conf", ".postgresql")
_LIBPQ_ENV = (
    "PGPASSFILE",
    "PGSERVICEFILE",
    "PGSYSCONFDIR",
    "PGSSLCERT",
    "PGSSLKEY",
    "PGSSLROOTCERT",
    "PGSSLCRL",
    "PGSSLCRLDIR",
)


def runtime_places(*, database_server: bool, env: Mapping[str, str] | None = None) -> list[Path]:
    """Every place this process may still read from once confined (some may not exist; the
    sandbox skips those). `database_server`: it connects to PostgreSQL through libpq."""
    env = os.environ if env is None else env
    places: list[str] = [*SYSTEM_PLACES, *_interpreter(), *_imported_packages()]
    if database_server:
        places += _libpq_files(env)
    return _unique(Path(place) for place in places)


def _interpreter() -> list[str]:
    here = os.path.realpath(os.getcwd())
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found.add(os.path.dirname(os.path.realpath(sys.executable)))
    for index, entry in enumerate(sys.path):
        # The first entry is the script's folder, or the working directory for `-c` and `-m`;
        # the latter is left out (entries the operator put there by PYTHONPATH are kept).
        if index == 0 and (not entry or os.path.realpath(entry) == here):
            continue
        if entry:
            found.add(entry)
    return sorted(found)


def _imported_packages() -> list[str]:
    """The folders of the top-level packages already imported: their submodules import later."""
    found: set[str] = set()
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        for folder in getattr(module, "__path__", None) or ():
            if isinstance(folder, str) and os.path.isabs(folder):
                found.add(folder)
    return sorted(found)


def _libpq_files(env: Mapping[str, str]) -> list[str]:
    home = env.get("HOME") or os.path.expanduser("~")
    named = [env[name] for name in _LIBPQ_ENV if env.get(name)]
    return [*(os.path.join(home, name) for name in _LIBPQ_HOME), *named]


def _unique(paths: Iterable[Path]) -> list[Path]:
    seen: dict[str, Path] = {}
    for path in paths:
        if path.is_absolute():
            seen.setdefault(os.path.realpath(path), path)
    return [Path(real) for real in seen]
