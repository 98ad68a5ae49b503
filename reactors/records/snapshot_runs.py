"""The runs a snapshot directory holds: which run a snapshot belongs to, which snapshot
``--resume DIR`` takes, and whether a run finished.

A snapshot belongs to one run: its manifest keeps the run's id (``lf.run_id()``, 32 hex
digits) and its name starts with the program and the id's first 8 digits,
``<program>.<run>.<tags:012d>.lfsnap`` (:func:`stem`; a snapshot written before runs were
named, ``<program>.<tags>.lfsnap``, is a run of its own without an id). Beside them, for each
run, ``.<program>.<run>.lock`` (:mod:`reactors.records.run_lock`) and, once the run finished,
``.<program>.<run>.finished``: a run finished when it reached its stop tag (its timeout, a
``request_stop()`` such as an RL program's target return or step budget, or nothing left to
do), whatever its exit status; not when it was killed, stopped by a signal (Ctrl-C, SIGTERM,
SIGHUP) or ended by an error before its stop tag. The mark holds one line of JSON: the run id,
the program, the stop tag (elapsed ns, microstep) and the time (UTC, ISO 8601).

``--resume DIR`` (:func:`choose`) takes the newest snapshot of the one run of the program in
DIR (or in its ``checkpoints`` folder, where an RL run directory keeps them). It refuses, with
what to do instead, a directory with snapshots of several runs of the program (listing each:
run, newest tag, when, finished or not, and the ``--resume FILE`` that picks it) and a run
that finished.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from typing import Any

from .snapshot import SnapshotError
from .snapshot_file import CHECKPOINTS, SUFFIX, newest, read_file

#: How many digits of the run id name a run's files (as its RL run directory does).
SHORT_ID = 8
_FINISHED = ".finished"
_LOCK = ".lock"


def stem(program: str, run_id: str) -> str:
    """``<program>.<first 8 digits of run_id>``: what a run's snapshot names start with (the
    program alone for a run without an id)."""
    return f"{program}.{run_id[:SHORT_ID]}" if run_id else program


def snapshot_path(directory: str, program: str, run_id: str, tags: int) -> str:
    """The file of the snapshot of run ``run_id`` of ``program`` taken after ``tags`` tags."""
    return os.path.join(directory, f"{stem(program, run_id)}.{tags:012d}{SUFFIX}")


def prune(directory: str, program: str, run_id: str, keep: int) -> None:
    """Remove all but the ``keep`` newest snapshots of run ``run_id`` of ``program`` in
    ``directory`` (those of other runs stay)."""
    run = run_id[:SHORT_ID]
    mine = [r for r in runs_in(directory) if (r.program, r.run) == (program, run)]
    for name in mine[0].files[:-keep] if mine else ():
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            pass


def lock_path(directory: str, program: str, run_id: str) -> str:
    """The lock file of run ``run_id`` of ``program`` whose snapshots are in ``directory``."""
    return os.path.join(directory, f".{stem(program, run_id)}{_LOCK}")


def _finished_path(directory: str, program: str, run_id: str) -> str:
    return os.path.join(directory, f".{stem(program, run_id)}{_FINISHED}")


def mark_finished(directory: str, program: str, run_id: str, tag: tuple[int, int]) -> None:
    """Mark run ``run_id`` of ``program`` (snapshots in ``directory``) finished at its stop
    tag ``tag`` (elapsed ns, microstep), atomically."""
    record = {"run_id": run_id, "program": program, "tag": list(tag), "time": _now()}
    path = _finished_path(directory, program, run_id)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    os.replace(tmp, path)


def unmark_finished(directory: str, program: str, run_id: str) -> None:
    """Forget that the run finished (it is being run again from one of its snapshots)."""
    try:
        os.unlink(_finished_path(directory, program, run_id))
    except FileNotFoundError:
        pass


def finished(directory: str, program: str, run_id: str) -> dict[str, Any] | None:
    """The mark of run ``run_id`` of ``program`` in ``directory`` (see the module docstring),
    or None if it did not finish."""
    try:
        with open(_finished_path(directory, program, run_id), encoding="utf-8") as f:
            mark: dict[str, Any] = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    return mark


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- runs of a directory


@dataclasses.dataclass(frozen=True)
class RunSnapshots:
    """The snapshots of one run in ``directory``: its ``program``, the first 8 digits of its
    id (``run``; "" for snapshots without one) and its snapshot ``files`` (names, oldest
    first)."""

    directory: str
    program: str
    run: str
    files: tuple[str, ...]

    @property
    def newest(self) -> str:
        """The path of its newest snapshot."""
        return os.path.join(self.directory, self.files[-1])

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest of its newest snapshot.

        Raises:
            SnapshotError: the file cannot be read.
        """
        return read_file(self.newest, parts=False, trust=True)[0]  # shown, not run: unchecked

    @property
    def finished(self) -> dict[str, Any] | None:
        """Its finished mark, or None."""
        return finished(self.directory, self.program, self.run)

    @property
    def name(self) -> str:
        """``run 1a2b3c4d of Foo`` (``run of Foo`` without an id)."""
        return f"run {self.run} of {self.program}" if self.run else f"run of {self.program}"


def parse_name(name: str) -> tuple[str, str, int] | None:
    """The program, run (8 digits or "") and tag count of a snapshot file name, or None for
    another file."""
    if not name.endswith(SUFFIX) or name.startswith("."):
        return None
    fields = name[: -len(SUFFIX)].split(".")
    if len(fields) not in (2, 3) or not fields[-1].isdigit():
        return None
    return fields[0], fields[1] if len(fields) == 3 else "", int(fields[-1])


def runs_in(directory: str) -> list[RunSnapshots]:
    """The runs whose snapshots are in ``directory`` (none if it is not one), by program and
    run."""
    found: dict[tuple[str, str], list[tuple[int, str]]] = {}
    names = os.listdir(directory) if os.path.isdir(directory) else []
    for name in names:
        parsed = parse_name(name)
        if parsed is not None:
            found.setdefault(parsed[:2], []).append((parsed[2], name))
    return [
        RunSnapshots(directory, program, run, tuple(n for _, n in sorted(files)))
        for (program, run), files in sorted(found.items())
    ]


def choose(path: str, program: str) -> str:
    """The snapshot file that ``--resume path`` names for ``program``: ``path`` itself when
    it is not a directory, else the newest snapshot of the one run of ``program`` in it (or in
    its ``checkpoints`` folder when it holds no snapshot).

    Raises:
        SnapshotError: no such file, no snapshot of ``program`` there, snapshots of several
            runs of it (the message lists them, one line each, with how to pick one), or that
            run finished (one line).
    """
    if not os.path.isdir(path):
        return newest(path)
    inner = os.path.join(path, CHECKPOINTS)
    folder = inner if not runs_in(path) and os.path.isdir(inner) else path
    runs = runs_in(folder)
    mine = [r for r in runs if r.program == program]
    if not mine:
        others = sorted({r.program for r in runs})
        held = f" (it holds snapshots of {', '.join(others)})" if others else ""
        raise SnapshotError(f"no snapshot (*{SUFFIX}) of {program} in {folder}{held}")
    if len(mine) > 1:
        lines = [describe(r) for r in sorted(mine, key=_created)]
        raise SnapshotError(
            f"{folder} holds the snapshots of {len(mine)} runs of {program}; resume one of "
            "them by the file of its newest snapshot:\n" + "\n".join(lines)
        )
    run = mine[0]
    mark = run.finished
    if mark is not None:
        raise SnapshotError(
            f"{run.name} finished {finished_when(mark)}: nothing to resume in {folder} (to run it "
            f"again from one of its snapshots, name the file: --resume {run.newest})"
        )
    return run.newest


def describe(run: RunSnapshots) -> str:
    """One line of the listing of :func:`choose`: run, newest tag, when it was taken, finished
    or not, and the option that resumes it."""
    try:
        manifest = run.manifest
        tag = f"newest tag {manifest['elapsed'] / 1e9:.3f} s ({manifest['tags']} tags)"
        when = _local(manifest.get("created", ""))
    except (SnapshotError, KeyError, TypeError):
        tag, when = "newest snapshot unreadable", "?"
    state = "finished" if run.finished is not None else "not finished"
    return (
        f"  run {run.run or '(no id)':<8}  {tag:<34} {when:<19}  {state:<12}  --resume {run.newest}"
    )


def _created(run: RunSnapshots) -> str:
    try:
        return str(run.manifest.get("created", ""))
    except SnapshotError:
        return ""


def finished_when(mark: dict[str, Any]) -> str:
    """``at 2026-11-28 07:50:12, at its stop tag 1.000 s``, from a finished mark."""
    tag = mark.get("tag") or [0, 0]
    return f"at {_local(mark.get('time', ''))}, at its stop tag {tag[0] / 1e9:.3f} s"


def _local(iso: str) -> str:
    """An ISO 8601 time in local time, to the second (``?`` if it is not one)."""
    try:
        moment = datetime.datetime.fromisoformat(iso)
    except ValueError:
        return "?"
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")
