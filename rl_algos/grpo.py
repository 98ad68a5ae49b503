"""GRPO: Group Relative Policy Optimization, after a supervised warm start, on a tiny LM.

Source: Shao et al. 2024, "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open
Language Models" (arXiv:2402.03300), section 4.1, with outcome supervision: for each prompt
``q`` the policy samples a group of ``G`` completions ``o_1..o_G`` with rewards ``r_i``; each
token of ``o_i`` gets the advantage ``A_i = (r_i - mean(r)) / (std(r) + eps)`` (the group's
mean and population standard deviation: no value network), and the objective is

    J = mean_i mean_t [ min(rho_t A_i, clip(rho_t, 1 - clip, 1 + clip) A_i) - beta KL_t ]
    rho_t = pi(o_t | q, o_<t) / pi_behaviour(o_t | q, o_<t)
    KL_t = pi_ref / pi - log(pi_ref / pi) - 1      (the unbiased k3 estimator, their eq. 4)

with ``pi_ref`` the frozen reference policy (here: the model after the supervised warm start)
and ``pi_behaviour`` the policy the generators sampled with: the current one in a synchronous
run, the one of ``staleness`` updates before in an asynchronous one, which the clipped ratio
then corrects for (as PPO's clipped ratio against the behaviour policy, Schulman et al. 2017).

:class:`GRPOLearner` does the warm start (cross-entropy on the task's answers for
``sft_steps`` minibatches) and the GRPO updates with Adam (:mod:`rl_algos.optim`).
:class:`BackgroundUpdate` runs an update on a thread of the learner's process, so that it
overlaps the generation of the next batch; its result is taken at a tag fixed by the program.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from time import perf_counter_ns
from typing import Any

import numpy as np
import torch

from . import grpo_task, tiny_lm
from .grpo_task import Task
from .lag import BackgroundUpdates
from .networks import Weights
from .optim import Adam, clip_grad_norm
from .runlog import atomic_save

#: :attr:`GRPOLearner.stats` -> TensorBoard tag (CleanRL's ``losses/`` names where they exist)
GRPO_TAGS = {
    "policy_loss": "losses/policy_loss",
    "kl": "losses/kl",
    "clipfrac": "losses/clipfrac",
    "grad_norm": "losses/grad_norm",
    "reward": "charts/train_reward",
}


@dataclass(frozen=True)
class GRPOConfig:
    """Hyperparameters (DeepSeekMath's where they apply: ``kl_coef`` 0.04, one update per
    batch) and the model's shape. ``group_size``: completions per prompt (G);
    ``temperature``: of the generators' sampling; ``sft_*``: the warm start (minibatches,
    their size, learning rate); ``update_epochs``: gradient steps per batch (the ratio is 1 at
    the first when the batch is on-policy)."""

    group_size: int = 8
    temperature: float = 1.0
    learning_rate: float = 3e-4
    kl_coef: float = 0.04
    clip_coef: float = 0.2
    update_epochs: int = 1
    max_grad_norm: float = 1.0
    partial_credit: float = 0.0
    sft_steps: int = 150
    sft_batch: int = 64
    sft_learning_rate: float = 1e-3
    width: int = 64
    layers: int = 2
    heads: int = 4


@dataclass(frozen=True)
class Rollout:
    """One batch of generated completions: ``prompts`` (B*G, P) int64 (each prompt repeated
    G times, a group's rows adjacent), ``completions`` (B*G, n) int64, ``behaviour_logp``
    (B*G, n) float32 (the generators' sampling log-probabilities), ``rewards`` (B*G,)
    float32 and ``ref_logp`` (B*G, n) float32 (the reference policy's)."""

    prompts: np.ndarray
    completions: np.ndarray
    behaviour_logp: np.ndarray
    rewards: np.ndarray
    ref_logp: np.ndarray


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4) -> torch.Tensor:
    """(B*G,) advantages of ``rewards`` (B*G,) float32, groups of ``group_size`` adjacent
    rows: (r - group mean) / (group population std + ``eps``); 0 for a group whose rewards
    are all equal."""
    r = rewards.view(-1, group_size)
    mean = r.mean(dim=1, keepdim=True)
    std = (r - mean).pow(2).mean(dim=1, keepdim=True).sqrt()
    return ((r - mean) / (std + eps)).reshape(-1)


def grpo_loss(
    logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    ref_logp: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
    kl_coef: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The negated GRPO objective (module docstring) of token log-probabilities ``logp``
    (N, n) float32 (with gradients), ``behaviour_logp`` and ``ref_logp`` (N, n) float32 and
    per-sequence ``advantages`` (N,): mean over sequences of the mean over their tokens.
    Returns the loss (scalar) and detached statistics: ``policy_loss``, ``kl``, ``clipfrac``
    (fraction of tokens whose ratio is clipped)."""
    ratio = torch.exp(logp - behaviour_logp)
    adv = advantages[:, None]
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - clip_coef, 1 + clip_coef) * adv)
    log_ref_ratio = ref_logp - logp
    kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1
    policy_loss = -surrogate.mean()
    kl_mean = kl.mean()
    clipfrac = ((ratio - 1).abs() > clip_coef).float().mean()
    stats = {"policy_loss": policy_loss.detach(), "kl": kl_mean.detach(), "clipfrac": clipfrac}
    return policy_loss + kl_coef * kl_mean, stats


class GRPOLearner:
    """The policy being trained: a :class:`~rl_algos.tiny_lm.TinyLM` on ``device``,
    initialised from ``torch_seed``; ``rng`` draws the warm start's problems.

    ``version`` counts GRPO updates; ``stats`` holds the last update's statistics (floats).
    """

    def __init__(
        self,
        cfg: GRPOConfig,
        task: Task,
        rng: np.random.Generator,
        torch_seed: int,
        device: torch.device,
    ) -> None:
        self.cfg, self.task, self.rng, self.device = cfg, task, rng, device
        spec = tiny_lm.LMSpec(
            grpo_task.VOCAB, task.prompt_len + task.answer_len, cfg.width, cfg.layers, cfg.heads
        )
        self.net = tiny_lm.build(spec, torch_seed, device)
        self.opt = Adam(self.net.parameters(), lr=cfg.sft_learning_rate)
        self.version = 0
        self.stats: dict[str, float] = {}

    def weights(self) -> Weights:
        """The current network as :class:`~rl_algos.networks.Weights` (numpy, CPU)."""
        return tiny_lm.export(self.net, self.version)

    def sft(self) -> float:
        """The supervised warm start: ``sft_steps`` Adam steps of cross-entropy on the
        answers of ``sft_batch`` training problems each; then the learning rate becomes
        the GRPO one. Returns the mean loss of the last tenth of the steps (nats/token)."""
        cfg, losses = self.cfg, []
        for _ in range(cfg.sft_steps):
            idx = grpo_task.train_indices(self.task, self.rng, cfg.sft_batch)
            prompts, answers = (self._tensor(a) for a in self.task.encode(idx))
            logp = tiny_lm.sequence_logp(self.net, prompts, answers)
            loss = -logp.mean()
            self._step(loss)
            losses.append(float(loss.detach()))
        self.opt = Adam(self.net.parameters(), lr=cfg.learning_rate)
        tail = losses[-max(1, len(losses) // 10) :]
        return float(np.mean(tail)) if tail else float("nan")

    def update(self, batch: Rollout) -> Weights:
        """``update_epochs`` GRPO steps on ``batch`` (module docstring); returns the new
        weights (``version`` one more) and sets ``stats``: ``policy_loss``, ``kl``,
        ``clipfrac``, ``reward`` (the batch's mean) and ``grad_norm``."""
        t = {k: self._tensor(v) for k, v in vars(batch).items()}
        adv = group_advantages(t["rewards"], self.cfg.group_size)
        for _ in range(self.cfg.update_epochs):
            logp = tiny_lm.sequence_logp(
                self.net, t["prompts"], t["completions"], self.cfg.temperature
            )
            loss, stats = grpo_loss(
                logp, t["behaviour_logp"], t["ref_logp"], adv, self.cfg.clip_coef, self.cfg.kl_coef
            )
            norm = self._step(loss)
        self.version += 1
        self.stats = {k: float(v) for k, v in stats.items()}
        self.stats.update(reward=float(batch.rewards.mean()), grad_norm=float(norm))
        return self.weights()

    def _step(self, loss: torch.Tensor) -> torch.Tensor:
        self.opt.zero_grad()
        loss.backward()
        norm = clip_grad_norm(self.net.parameters(), self.cfg.max_grad_norm)
        self.opt.step()
        return norm

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)


class BackgroundUpdate:
    """Runs ``learner.update`` on the background thread of this process that the learners
    share (:class:`rl_algos.lag.BackgroundUpdates`; torch releases the GIL in its kernels, so
    it overlaps what the reactions of this worker do meanwhile) with ``threads`` intra-op
    threads, one update at a time. :meth:`start` hands it a batch, :meth:`join` waits for the
    result; which weights the program uses then depends only on when it joins, never on how
    fast the update was.

    Pickled (a snapshot), it first waits for the pending update and keeps its result, so a
    snapshot waits for the update in flight and a resumed run hands over the same weights.
    """

    def __init__(self, learner: GRPOLearner, threads: int = 1) -> None:
        self.learner, self.threads = learner, threads
        self.updates = BackgroundUpdates()
        self.spans: list[tuple[int, int]] = []  # (start, end) of each update, perf_counter_ns

    def start(self, batch: Rollout) -> None:
        """Begin ``learner.update(batch)``. Raises RuntimeError when one is pending."""
        if self.busy:
            raise RuntimeError("an update is already in flight: join it first")
        self.updates.submit(partial(self._run, batch))

    @property
    def busy(self) -> bool:
        """Whether an update was started and not joined yet."""
        return len(self.updates) > 0

    def _run(self, batch: Rollout) -> Weights:
        torch.set_num_threads(self.threads)
        t0 = perf_counter_ns()
        try:
            return self.learner.update(batch)
        finally:
            self.spans.append((t0, perf_counter_ns()))

    def join(self) -> Weights | None:
        """The pending update's new weights (waiting for it), or None when none is pending.
        Re-raises the update's exception."""
        return self.updates.collect() if self.busy else None

    def close(self) -> None:
        """Wait for a pending update (its result stays for :meth:`join`)."""
        self.updates.wait()

    def __getstate__(self) -> dict[str, Any]:
        """The learner and the pending update's result (waited for: the learner is then as
        the update left it); not the spans, which belong to this process's trace."""
        self.updates.finish()  # before the learner is saved: it is then as the update left it
        return {"learner": self.learner, "threads": self.threads, "updates": self.updates}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restored from a snapshot: the pending result kept for :meth:`join`."""
        self.learner, self.threads = state["learner"], state["threads"]
        self.updates = state["updates"]
        self.spans = []


def save_model(trainer: BackgroundUpdate, path: str) -> None:
    """Write the learner's policy to ``path`` (``model.pt``, atomically: algo, the network's
    spec and state dict, the config and the number of updates), once its update in flight
    has finished."""
    trainer.close()
    learner = trainer.learner
    atomic_save(
        {
            "algo": "grpo",
            "spec": vars(learner.net.spec),
            "state_dict": learner.net.state_dict(),
            "config": vars(learner.cfg),
            "updates": learner.version,
        },
        path,
    )
