"""Generated note databases, cached under bench-results/ by size and schema revision.

The schema comes from notes-server's own migrations (`notes-server migrate`); notes are then bulk
loaded with raw sqlite3 `executemany`. The FTS triggers are dropped for the load and each FTS5
index is filled in one INSERT ... SELECT in rowid order (timed: the reported index build time),
then the triggers are re-created from the exact SQL they had, so the file is indistinguishable
from one the server filled.

The search databases are "mixed" (generator 3): `notes` notes live in WORKSPACE, every
ARCHIVED_EVERY-th note archived, and a tenth as many more in OTHER_WORKSPACE (the bench principal
may read both), interleaved by rowid, so a search's scope (one workspace, archived excluded by
default) is a strict subset of the index, as in any real deployment. The other benchmarks' databases
keep the single-workspace shape (their accounting counts the whole table and splits it by seq).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from peers.peer_index import PEER_FTS_REBUILD, PEER_FTS_SQL

from bench_lib.common import BENCH_PRINCIPAL, VENV_PY, WORKSPACE, server_env
from notes_server.store.models import ARCHIVED_SHIFT, SCOPE_SHIFT, SCOPE_TABLE

GENERATOR_VERSION = 4  # 4: the SDK peer's own index (peer_fts) in every database
OTHER_WORKSPACE = "file:///bench/other"
OTHER_SHARE = 10  # OTHER_WORKSPACE holds notes // OTHER_SHARE notes beside WORKSPACE's `notes`
ARCHIVED_EVERY = 50  # every 50th note of each workspace is archived (2 %)
VOCABULARY = 20_000
WORDS_PER_BODY = 72  # ~500 bytes of text per body
STOP_RANKS = 100  # queries skip the most frequent words, as people do
_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["qu", "th", "sh", "ch"]


@dataclass(frozen=True)
class DatasetInfo:
    path: str
    notes: int
    load_s: float
    index_build_s: float
    size_bytes: int
    generated_now: bool


def vocabulary(seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < VOCABULARY:
        count = int(rng.integers(2, 5))
        word = "".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), count))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _zipf_cdf() -> np.ndarray:
    weights = 1.0 / np.arange(1, VOCABULARY + 1)
    cdf: np.ndarray = np.cumsum(weights / weights.sum())
    return cdf


def queries(count: int, seed: int = 11) -> list[str]:
    """Search strings as people type them: one or two words drawn from the text's own
    (Zipf) distribution, minus the 100 most frequent words. Fixed by the seed, never tuned."""
    words = vocabulary()
    cdf = _zipf_cdf()
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < count:
        n_words = 1 if rng.random() < 0.5 else 2
        ranks = np.searchsorted(cdf, rng.random(n_words))
        if any(int(r) < STOP_RANKS for r in ranks):
            continue
        out.append(" ".join(words[int(r)] for r in ranks))
    return out


def title_for(index: int) -> str:
    """Unique, deterministic titles: the delete benchmark confirms deletes by exact title."""
    return f"note {index:07d}"


def _rows(  # type: ignore[no-untyped-def]
    start: int,
    stop: int,
    notes: int,
    mixed: bool,
    words: list[str],
    cdf: np.ndarray,
    rng: np.random.Generator,
):
    """Rows `start`..`stop` of the load: indexes below `notes` are WORKSPACE's notes (ids, paths
    and titles by index, as before), the rest OTHER_WORKSPACE's, interleaved by index order so
    neither workspace is one contiguous block of rowids."""
    vocab = np.array(words, dtype=object)
    picks = np.searchsorted(cdf, rng.random((stop - start, WORDS_PER_BODY)))
    stamp = "2026-01-01 00:00:00.000000"
    for offset, row in enumerate(vocab[picks]):
        i = start + offset
        title = title_for(i)
        workspace = WORKSPACE if i < notes else OTHER_WORKSPACE
        archived = 1 if mixed and i % ARCHIVED_EVERY == ARCHIVED_EVERY - 1 else 0
        yield (
            f"note_{i:020x}",
            workspace,
            f"n/{i:07d}.md",
            title,
            title,
            " ".join(row),
            stamp,
            stamp,
            archived,
            stamp if archived else None,
        )


def _load_order(notes: int, mixed: bool) -> list[tuple[int, int]]:
    """Index ranges in insertion order: each batch of WORKSPACE's notes is followed (mixed) by
    its share of OTHER_WORKSPACE's: the second workspace's rowids spread through the table."""
    batch = 50_000
    other = notes // OTHER_SHARE if mixed else 0
    out: list[tuple[int, int]] = []
    other_at = notes
    for start in range(0, notes, batch):
        stop = min(notes, start + batch)
        out.append((start, stop))
        share = min(notes + other, other_at + (stop - start) // OTHER_SHARE)
        if stop == notes:
            share = notes + other
        if share > other_at:
            out.append((other_at, share))
            other_at = share
    return out


def migrate_empty(path: Path) -> None:
    subprocess.run(
        [VENV_PY, "-m", "notes_server", "migrate", "--db", f"sqlite:///{path}"],
        check=True,
        capture_output=True,
        env=server_env(),
    )


def grant(path: Path, principal: str = BENCH_PRINCIPAL) -> None:
    """The bench principal may write WORKSPACE and OTHER_WORKSPACE."""
    conn = sqlite3.connect(path)
    with conn:
        for workspace in (WORKSPACE, OTHER_WORKSPACE):
            conn.execute(
                "INSERT INTO workspace_grants (principal, workspace, role, created_at)"
                " VALUES (?, ?, 'write', '2026-01-01 00:00:00.000000')",
                (principal, workspace),
            )
    conn.close()


def build(path: Path, notes: int, seed: int = 3, *, mixed: bool = False) -> tuple[float, float]:
    """Create a migrated database holding `notes` generated notes in WORKSPACE (and, `mixed`,
    archived ones and OTHER_WORKSPACE's); returns (load s, index s)."""
    migrate_empty(path)
    grant(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    triggers = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'notes'"
    ).fetchall()
    words, cdf, rng = vocabulary(), _zipf_cdf(), np.random.default_rng(seed)
    started = time.perf_counter()
    conn.execute("BEGIN")
    for name, _sql in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    for start, stop in _load_order(notes, mixed):
        conn.executemany(
            "INSERT INTO notes (id, workspace, path, title, title_key, body, created_at,"
            " updated_at, version, archived, archived_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            _rows(start, stop, notes, mixed, words, cdf, rng),
        )
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    # Every index over `notes` is filled (the word index and, since 0013, the trigram index):
    # one left behind reads as a corrupt database at the first delete. Since 0025 both are
    # contentless, keyed by scope (models.SCOPE_SHIFT): filled as the migration fills them.
    conn.execute(
        f"INSERT OR IGNORE INTO {SCOPE_TABLE}(workspace)"
        " SELECT DISTINCT workspace FROM notes ORDER BY 1"
    )
    for index, body in (("notes_fts", "body"), ("notes_fts_tri", "body_spaceless")):
        conn.execute(
            f"INSERT INTO {index}(rowid, title, {body})"
            f" SELECT s.key * {SCOPE_SHIFT} + n.archived * {ARCHIVED_SHIFT} + n.seq, n.title,"
            f" n.{body} FROM notes AS n JOIN {SCOPE_TABLE} AS s ON s.workspace = n.workspace"
            " ORDER BY 1"
        )
    for _name, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    index_s = time.perf_counter() - started
    # The SDK peer's own full-text index (sdk_notes_server.PEER_FTS: external content over
    # `notes`, no triggers), built here once so that its start never builds it; not timed.
    conn.execute("BEGIN")
    conn.execute(PEER_FTS_SQL)
    conn.execute(PEER_FTS_REBUILD)
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    return load_s, index_s


def schema_head() -> str:
    from notes_server.store.migrate import HEAD

    return HEAD


def cached(cache_dir: Path, notes: int, *, mixed: bool = False) -> DatasetInfo:
    """The database for `notes` notes (`mixed`: the search shape, see the module docstring),
    generated on first use and reused afterwards."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    shape = "-mixed" if mixed else ""
    stem = f"notes-{notes}{shape}-g{GENERATOR_VERSION}-s{schema_head()}"
    path = cache_dir / f"{stem}.db"
    meta = cache_dir / f"{stem}.json"
    if path.exists() and meta.exists():
        info = json.loads(meta.read_text())
        info["path"] = str(path.resolve())
        info["generated_now"] = False
        return DatasetInfo(**info)
    tmp = cache_dir / f"{stem}.tmp-{os.getpid()}.db"
    for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        leftover.unlink(missing_ok=True)
    load_s, index_s = build(tmp, notes, mixed=mixed)
    os.replace(tmp, path)
    info = DatasetInfo(str(path.resolve()), notes, load_s, index_s, path.stat().st_size, True)
    meta.write_text(json.dumps(asdict(info)))
    return info


def working_copy(source: str, dest: Path) -> Path:
    """A private copy for benchmarks that write (deletes), so the cache stays pristine."""
    for leftover in (dest, Path(f"{dest}-wal"), Path(f"{dest}-shm")):
        leftover.unlink(missing_ok=True)
    shutil.copyfile(source, dest)
    return dest


def note_ids(path: str, limit: int, seed: int = 5) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    # WORKSPACE's notes are indexes 0..n-1 (OTHER_WORKSPACE's come after): ids from those only.
    (total,) = conn.execute(
        "SELECT count(*) FROM notes WHERE workspace = ?", (WORKSPACE,)
    ).fetchone()
    conn.close()
    rng = np.random.default_rng(seed)
    return [f"note_{int(i):020x}" for i in rng.integers(0, total, limit)]
