"""A description of the machine and software a run measured."""

from __future__ import annotations

import os
import platform
import sqlite3
from importlib import metadata


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram() -> str:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _os() -> str:
    pretty = ""
    try:
        with open("/etc/os-release", encoding="utf-8") as release:
            for line in release:
                if line.startswith("PRETTY_NAME="):
                    pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return f"{pretty or platform.system()} (kernel {platform.release()})"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe() -> list[tuple[str, str]]:
    return [
        ("CPU", _cpu_model()),
        ("cores", str(os.cpu_count())),
        ("RAM", _ram()),
        ("OS", _os()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("SQLite", sqlite3.sqlite_version),
        ("notes-server", _version("notes-server")),
        ("mcp (peer)", _version("mcp")),
        ("SQLAlchemy", _version("SQLAlchemy")),
        ("uvicorn", _version("uvicorn")),
    ]
