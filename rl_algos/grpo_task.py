"""Verifiable tasks for GRPO: problems a program generates, with a held-out set, and their reward.

A task is a family of problems whose answer a program checks exactly (the "verifiable
rewards" of DeepSeekMath/GRPO, Shao et al. 2024, and of Tülu 3's RLVR): here multi-digit
addition, written as tokens. ``"addition"`` with ``digits = d``: the prompt is ``a + b =``
(each number ``d`` digits, most significant first, zero-padded) and the answer the ``d + 1``
digits of ``a + b`` least significant first, the order in which a person adds with carries
(small transformers learn reversed sums far faster; Lee et al. 2023, "Teaching Arithmetic to
Small Transformers"). ``"sort"`` with ``digits = d``: the prompt is ``d`` digits and ``>``,
the answer the same digits in ascending order.

Every problem has an index ``x`` in ``[0, 10 ** (2d))`` (addition) or ``[0, 10 ** d)``
(sort); a fixed tenth of the indices (:func:`held_out`, a multiplicative hash, the same for
every seed) is held out: training prompts never come from it, and the held-out accuracy is
measured on :data:`EVAL_SIZE` problems drawn from it.

Reward (:func:`rewards`): 1.0 for an exact answer, else ``partial`` times the fraction of
answer positions right (0 by default: exact match only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Token ids: the digits 0-9 are themselves; then the separators.
PLUS, EQUALS, ARROW = 10, 11, 12
VOCAB = 13
TASKS = ("addition", "sort")
#: How many held-out problems the accuracy is measured on (fewer when the task has fewer).
EVAL_SIZE = 256
#: Knuth's multiplicative hash constant (TAOCP vol. 3, 6.4): spreads consecutive indices.
_HASH = 2654435761


@dataclass(frozen=True)
class Task:
    """A task (``name`` in :data:`TASKS`) of ``digits``-digit problems.

    Raises ValueError for an unknown name or ``digits`` outside 1..6 (addition: 1..3, whose
    ``10 ** (2 * digits)`` problems an index array still holds)."""

    name: str = "addition"
    digits: int = 2

    def __post_init__(self) -> None:
        most = 3 if self.name == "addition" else 6
        if self.name not in TASKS:
            raise ValueError(f"task {self.name!r}: one of {', '.join(TASKS)}")
        if not 1 <= self.digits <= most:
            raise ValueError(f"digits = {self.digits}: 1 to {most} for task {self.name!r}")

    @property
    def size(self) -> int:
        """How many distinct problems there are."""
        return 10 ** (2 * self.digits if self.name == "addition" else self.digits)

    @property
    def prompt_len(self) -> int:
        """Tokens of a prompt."""
        return 2 * self.digits + 2 if self.name == "addition" else self.digits + 1

    @property
    def answer_len(self) -> int:
        """Tokens of an answer."""
        return self.digits + 1 if self.name == "addition" else self.digits

    def encode(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Prompts (n, prompt_len) and answers (n, answer_len), int64, of the problems
        ``index`` (n,) int64."""
        index = np.asarray(index, dtype=np.int64)
        if self.name == "addition":
            a, b = np.divmod(index, 10**self.digits)
            prompt = np.concatenate(
                [_digits(a, self.digits), _col(PLUS, a), _digits(b, self.digits), _col(EQUALS, a)],
                axis=1,
            )
            return prompt, _digits(a + b, self.digits + 1)[:, ::-1].copy()
        d = _digits(index, self.digits)
        return np.concatenate([d, _col(ARROW, index)], axis=1), np.sort(d, axis=1)


def _digits(x: np.ndarray, n: int) -> np.ndarray:
    """(len(x), n) int64: the n decimal digits of each x, most significant first."""
    powers = 10 ** np.arange(n - 1, -1, -1, dtype=np.int64)
    return (x[:, None] // powers) % 10


def _col(token: int, like: np.ndarray) -> np.ndarray:
    return np.full((len(like), 1), token, dtype=np.int64)


def held_out(index: np.ndarray) -> np.ndarray:
    """(n,) bool: whether each problem index (int64) is in the held-out tenth."""
    h = (np.asarray(index, dtype=np.uint64) * np.uint64(_HASH)) % np.uint64(1 << 32)
    return (h >> np.uint64(16)) % np.uint64(10) == 0


def train_indices(task: Task, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` problem indices (int64) drawn uniformly from ``rng`` among those not held out."""
    out = np.empty(0, dtype=np.int64)
    while len(out) < n:
        x = rng.integers(0, task.size, size=2 * n, dtype=np.int64)
        out = np.concatenate([out, x[~held_out(x)]])
    return out[:n]


def eval_indices(task: Task) -> np.ndarray:
    """The held-out problems the accuracy is measured on: up to :data:`EVAL_SIZE` of them,
    the same for every seed (int64, ascending)."""
    x = np.arange(task.size, dtype=np.int64)
    x = x[held_out(x)]
    if len(x) <= EVAL_SIZE:
        return x
    rng = np.random.Generator(np.random.PCG64(0))
    return np.sort(rng.choice(x, size=EVAL_SIZE, replace=False))


def rewards(completions: np.ndarray, answers: np.ndarray, partial: float = 0.0) -> np.ndarray:
    """(n,) float32 rewards of ``completions`` against ``answers`` (both (n, answer_len)
    int64): 1.0 for an exact match, else ``partial`` times the fraction of positions right.

    Raises ValueError when the shapes differ or ``partial`` is outside [0, 1)."""
    if completions.shape != answers.shape:
        raise ValueError(f"completions {completions.shape} and answers {answers.shape} differ")
    if not 0.0 <= partial < 1.0:
        raise ValueError(f"partial = {partial}: in [0, 1)")
    right = completions == answers
    exact = right.all(axis=1)
    return np.where(exact, 1.0, partial * right.mean(axis=1)).astype(np.float32)


def render(task: Task, tokens: np.ndarray) -> str:
    """A row of tokens as text (``12+34=`` and a reversed answer ``640``), for messages."""
    del task
    return "".join("0123456789+=>"[int(t)] for t in tokens)
