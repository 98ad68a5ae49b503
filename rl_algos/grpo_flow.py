"""The messages of the GRPO dataflow (``lf_src/lib/GRPO.lf``) and what each reactor computes.

The dataflow is that of the LLM post-training systems (RLHF/GRPO pipelines such as
HybridFlow and AsyncFlow): a prompt source, a bank of generators sampling completions from
the current policy, a verifier computing rewards, a reference model computing the frozen
policy's log-probabilities, and a learner whose updates send new weights back to the
generators. Every message is plain numpy data, so it crosses workers without torch.

Rows: a step's ``B`` prompts are split among the ``N`` generators in bank order
(:func:`share`), each generator samples ``G`` completions per prompt (a group's rows
adjacent), and the verifier, the reference and the learner join the generators' messages in
bank order (:func:`join`): row ``i * G + j`` is completion ``j`` of prompt ``i``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import torch

from . import grpo_task, tiny_lm
from .config import ConfigError
from .grpo import Rollout
from .grpo_task import Task
from .networks import Weights
from .runlog import reopen, written


@dataclass(frozen=True)
class Prompts:
    """One step's prompts: ``step`` (from 0), ``prompts`` (B, P) int64 for sampling, and
    ``heldout`` (E, P) int64 held-out prompts to answer greedily, or None at steps without
    an evaluation."""

    step: int
    prompts: np.ndarray
    heldout: np.ndarray | None


@dataclass(frozen=True)
class Answers:
    """The answers of a :class:`Prompts`: ``answers`` (B, A) and ``heldout`` (E, A) or
    None, int64."""

    step: int
    answers: np.ndarray
    heldout: np.ndarray | None


@dataclass(frozen=True)
class Completions:
    """One generator's share of a step: ``prompts`` (b*G, P) int64 (each prompt G times),
    ``tokens`` (b*G, A) int64 sampled, their sampling log-probabilities ``logp`` (b*G, A)
    float32, greedy answers ``heldout`` (e, A) int64 to its share of the held-out prompts
    (or None), and ``version``, the number of updates of the weights it sampled with."""

    step: int
    version: int
    prompts: np.ndarray
    tokens: np.ndarray
    logp: np.ndarray
    heldout: np.ndarray | None


@dataclass(frozen=True)
class Scores:
    """The verifier's result for a step: ``rewards`` (B*G,) float32 in row order, the
    held-out ``accuracy`` (fraction of exact answers) or None, ``version`` of the weights
    that answered, and ``tokens``, the completion tokens sampled this step."""

    step: int
    version: int
    rewards: np.ndarray
    accuracy: float | None
    tokens: int


def share(rows: np.ndarray, member: int, members: int) -> np.ndarray:
    """Bank member ``member``'s part of ``rows`` (n, ...) split in ``members`` contiguous
    parts as equal as can be (numpy's ``array_split``)."""
    return np.array_split(rows, members)[member]


def join(parts: Sequence[Completions]) -> Completions:
    """The completions of every generator, in bank order, as one message."""
    held = [p.heldout for p in parts if p.heldout is not None]
    return Completions(
        parts[0].step,
        parts[0].version,
        np.concatenate([p.prompts for p in parts]),
        np.concatenate([p.tokens for p in parts]),
        np.concatenate([p.logp for p in parts]),
        np.concatenate(held) if held else None,
    )


def check(
    task: str, digits: int, staleness: int, prompts_per_step: int, generators: int, group_size: int
) -> Task:
    """The :class:`~rl_algos.grpo_task.Task` of a GRPO program's parameters, checked.

    Raises:
        ConfigError: (a one-line error when the program starts) naming the parameter: an
            unknown task or digits out of range, ``staleness`` not 0 or 1, a group of fewer
            than 2 completions (no relative advantage), or fewer prompts per step than
            generators.
    """
    if staleness not in (0, 1) or isinstance(staleness, bool):
        raise ConfigError(f"staleness = {staleness!r}: 0 (synchronous) or 1 (asynchronous)")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ConfigError(f"group_size = {group_size!r}: an integer >= 2 (a group's rewards)")
    if not isinstance(prompts_per_step, int) or prompts_per_step < generators:
        raise ConfigError(
            f"prompts_per_step = {prompts_per_step!r}: an integer >= generators ({generators})"
        )
    try:
        return Task(task, digits)
    except ValueError as e:
        raise ConfigError(str(e)) from None


class PromptSampler:
    """The prompt source's draws: ``n`` training problems per step from ``rng``, and the
    held-out problems every ``eval_every`` steps (and at step 0 and ``last``)."""

    def __init__(
        self, task: Task, rng: np.random.Generator, n: int, eval_every: int, last: int
    ) -> None:
        self.task, self.rng, self.n = task, rng, n
        self.eval_every, self.last = eval_every, last
        self.heldout = task.encode(grpo_task.eval_indices(task))

    def draw(self, step: int) -> tuple[Prompts, Answers]:
        """Step ``step``'s prompts and answers."""
        prompts, answers = self.task.encode(grpo_task.train_indices(self.task, self.rng, self.n))
        evaluate = step % self.eval_every == 0 or step >= self.last
        held_p, held_a = self.heldout if evaluate else (None, None)
        return Prompts(step, prompts, held_p), Answers(step, answers, held_a)


class Sampler:
    """A generator's policy copy on ``device`` and its draws (``torch_seed``)."""

    def __init__(self, torch_seed: int, device: torch.device) -> None:
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(int(torch_seed))
        self.net: tiny_lm.TinyLM | None = None
        self.version = -1

    def load(self, w: Weights) -> None:
        """Take new weights (the next steps sample with them)."""
        self.net = tiny_lm.load(w, self.net, self.device)
        self.version = w.version

    def complete(
        self, p: Prompts, member: int, members: int, answer_len: int, group: int, temp: float
    ) -> Completions:
        """Member ``member``'s share of ``p``: ``group`` completions of ``answer_len``
        tokens per prompt at temperature ``temp``, and greedy answers to its share of the
        held-out prompts. Raises RuntimeError before the first weights."""
        if self.net is None:
            raise RuntimeError("a generator got prompts before any weights")
        mine = np.repeat(share(p.prompts, member, members), group, axis=0)
        s = tiny_lm.sample(self.net, mine, answer_len, temp, self.generator)
        held = None
        if p.heldout is not None:
            part = share(p.heldout, member, members)
            held = tiny_lm.sample(self.net, part, answer_len, 0.0, None).tokens
        return Completions(p.step, self.version, mine, s.tokens, s.logp, held)


def score(c: Completions, a: Answers, group: int, partial: float) -> Scores:
    """The verifier: rewards of the joined completions ``c`` against the answers ``a``
    (each repeated ``group`` times) and the held-out accuracy (exact match)."""
    rewards = grpo_task.rewards(c.tokens, np.repeat(a.answers, group, axis=0), partial)
    accuracy = None
    if c.heldout is not None and a.heldout is not None:
        accuracy = float(grpo_task.rewards(c.heldout, a.heldout).mean())
    return Scores(c.step, c.version, rewards, accuracy, int(c.tokens.size))


@torch.no_grad()
def reference_logp(net: tiny_lm.TinyLM, c: Completions, temperature: float) -> np.ndarray:
    """The reference policy's log-probabilities (B*G, A) float32 of the joined completions."""
    dev = next(net.parameters()).device
    prompts, tokens = (torch.from_numpy(a).to(dev) for a in (c.prompts, c.tokens))
    return tiny_lm.sequence_logp(net, prompts, tokens, temperature).cpu().numpy()


def rollout(c: Completions, s: Scores, ref_logp: np.ndarray) -> Rollout:
    """The learner's batch from the joined completions, their scores and reference
    log-probabilities."""
    return Rollout(c.prompts, c.tokens, c.logp, s.rewards, ref_logp)


class TokenRate:
    """Completion tokens per second of wall clock from the first step counted (the warm
    start and start-up left out): ``add`` each step's tokens, ``rate`` the mean so far."""

    def __init__(self) -> None:
        self.t0 = 0.0
        self.tokens = 0
        self.first = True

    def add(self, tokens: int) -> None:
        """Count a step's ``tokens`` (the first step only starts the clock)."""
        if self.first:
            self.t0, self.first = time.monotonic(), False
            return
        self.tokens += tokens

    def rate(self) -> float:
        """Tokens per second since the first step (0 before the second)."""
        dt = time.monotonic() - self.t0
        return self.tokens / dt if self.tokens and dt > 0 else 0.0


class AccuracyLog:
    """``accuracy.csv`` of a run directory: ``step,updates,accuracy`` per evaluation (the
    dataflow step, the updates of the weights that answered, the held-out accuracy): only
    logical quantities, so the same seed and layout give the same bytes. Line-buffered; saved
    in a snapshot, it remembers how many bytes it wrote and, restored, cuts the file back."""

    HEADER = "step,updates,accuracy\n"

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self.file: IO[str] = open(self.path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.file.write(self.HEADER)
        self.rows: list[tuple[int, int, float]] = []

    def add(self, step: int, updates: int, accuracy: float) -> None:
        """One evaluation's row."""
        self.rows.append((step, updates, accuracy))
        self.file.write(f"{step},{updates},{accuracy:.6g}\n")

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        if not self.file.closed:
            self.file.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "rows": self.rows, "written": written(self.file)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.rows = state["path"], state["rows"]
        self.file = reopen(self.path, state["written"])
