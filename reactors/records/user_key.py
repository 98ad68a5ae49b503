"""The user's secret key, which authenticates the files a run writes and a later run unpickles:
snapshots (``--resume``, :mod:`reactors.records.snapshot_file`) and recordings (``--replay``,
:mod:`reactors.records.recording_file`).

Run directories are what people share, and unpickling a file runs whatever code it names. So
each such file carries an HMAC-SHA256 (RFC 2104; :mod:`hmac`, :mod:`hashlib`) of its bytes
under a key that stays outside any run directory, and a run checks it before it unpickles
anything: a file written under another key (another user's, another machine's), changed since,
or written by a version without HMACs is refused unless the user says ``--trust``.

**Where.** The file named by the environment variable ``LF_RL_KEY`` (:data:`ENV`), else
``$XDG_CONFIG_HOME/lf-rl/key``, else ``~/.config/lf-rl/key``.

**Made** on first use: :data:`SIZE` random bytes (:func:`secrets.token_bytes`), mode 0600, in a
folder made with mode 0700. It is written whole to a temporary file and then hard-linked to its
name, which fails if the name exists: two first runs at once agree on one key (the loser reads
the winner's). Copy the file to another machine (or point ``LF_RL_KEY`` at a shared copy) to
resume there, or on a Ray cluster of several nodes.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets

#: The environment variable naming the key file.
ENV = "LF_RL_KEY"
#: Bytes of a key, and of an HMAC-SHA256.
SIZE = 32

_cache: dict[str, bytes] = {}


class KeyFileError(Exception):
    """The key file cannot be read or made; the message names it and the system's reason."""


def key_path() -> str:
    """The path of the user's key file (see the module's docstring)."""
    given = os.environ.get(ENV)
    if given:
        return os.path.abspath(os.path.expanduser(given))
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "lf-rl", "key")


def user_key() -> bytes:
    """The user's key (:data:`SIZE` bytes), made on first use; read once per process.

    Raises:
        KeyFileError: it cannot be read or made (a read-only home, say), or it is shorter
            than :data:`SIZE` bytes.
    """
    path = key_path()
    key = _cache.get(path)
    if key is None:
        try:
            key = _read(path) if os.path.exists(path) else _make(path)
        except OSError as e:
            raise KeyFileError(
                f"cannot read or make the key that authenticates snapshots and recordings, "
                f"{path}: {e.strerror or e} (set {ENV} to a file elsewhere)"
            ) from None
        _cache[path] = key
    return key


def key_problem() -> str | None:
    """Why the user's key cannot be read or made (see :func:`user_key`), or None: checked
    when a run starts that will write or read authenticated files."""
    try:
        user_key()
    except KeyFileError as e:
        return str(e)
    return None


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        key = f.read()
    if len(key) < SIZE:
        raise KeyFileError(
            f"the key {path} holds {len(key)} bytes, fewer than {SIZE}: remove it (a new one "
            f"is made) or point {ENV} at another"
        )
    return key


def _make(path: str) -> bytes:
    """Make the key file ``path`` unless another process makes it first; the key it holds."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(SIZE))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another first run made it: take theirs
            os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return _read(path)


def new_mac(*pieces: bytes | memoryview) -> hmac.HMAC:
    """An HMAC-SHA256 under the user's key, fed ``pieces`` so far (``update`` for more).

    Raises:
        KeyFileError: see :func:`user_key`.
    """
    mac = hmac.new(user_key(), digestmod=hashlib.sha256)
    for p in pieces:
        mac.update(p)
    return mac


def matches(mac: hmac.HMAC, given: bytes | memoryview) -> bool:
    """Whether ``given`` is ``mac``'s digest (compared in constant time)."""
    return hmac.compare_digest(mac.digest(), given)


#: Why a file is not authenticated, as the refusals say it.
CHANGED = (
    "its HMAC does not match your key: it was written under another key (another user's) "
    "or changed since"
)
OLDER = "it was written by an older version, without an HMAC"


def refusal(what: str, why: str) -> str:
    """The message refusing the file ``what`` (e.g. ``cannot resume from FILE``) for ``why``
    (:data:`CHANGED`, :data:`OLDER`): what it is, why, and how to trust it."""
    return (
        f"{what}: it is not authenticated by your key ({key_path()}): {why}; it would be "
        "unpickled, which can run any code: add --trust to load it anyway if you trust it"
    )


def trusted(path: str, why: str) -> str:
    """What is said when ``--trust`` loads the file ``path``, which is not authenticated for
    ``why``."""
    return f"--trust: loading {path}, which your key does not authenticate ({why})"
