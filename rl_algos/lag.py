"""Policy lag in logical time: a learner's update runs off the tag's thread, its weights
delivered a fixed number of rollouts later, so acting and learning overlap deterministically.

With ``policy_lag = k`` (k >= 1) the learner that completes rollout i at tag T_i starts
update i on a background thread of its worker and returns at once; the actors go on with
rollouts i+1, i+2, ...; at T_{i+k}, when rollout i+k is complete, the learner collects update
i (waiting there if it is not finished) and only then sends its weights. Rollout j is
therefore acted with the weights of update j-k-1 (the initial weights for j <= k), whatever
the timing, the worker count or the backend: which weights act at which tag depends on
logical time only, and the updates run one after another on one thread, each from the
network the previous one left, so their numbers are those of a run on one worker. ``k = 0``
is the synchronous schedule (the update inside the tag's reaction), untouched.

Everything an update needs from the network is computed on the background thread, at the
start of the update: the values V(s_t) of the rollout (the actors' values are k updates
old), V of the state after it, and gamma * V(final observation) of time-limit truncations.

**Off-policy correction.** The actors' log-probabilities log mu(a|s) are in their records
(:class:`rl_algos.ppo.ActRecord`); PPO's clipped surrogate takes its ratio
pi_theta(a|s) / mu(a|s) against them, which is the clipped importance ratio against the
behaviour policy of APPO (IMPALA's actor-learner split, Espeholt et al. 2018, trained with
PPO's clipped surrogate, Schulman et al. 2017). ``off_policy`` picks the advantages and value
targets: ``"ratio"`` (the default) GAE(lambda) from the learner's current values;
``"vtrace"`` V-trace (Espeholt et al. 2018, :mod:`rl_algos.vtrace`), which also truncates
the importance weights in the targets. The default is ``"ratio"`` because at the lags this
module is for (a few updates) the behaviour policy is within a few clipped steps of the
learner's, and the clipped ratio already bounds how far one sample moves the policy; with
``policy_lag = 0`` it is exactly the synchronous PPO. Sample Factory's APPO (Petrenko et al.
2020) makes the same choice: PPO's clipped ratio against the behaviour policy, with GAE
unless ``--with_vtrace`` (False by default in its version 2; V-trace then replaces GAE).

**Snapshots and stops.** Pickling a learner waits for its pending updates and saves their
results (weights, losses), still to be delivered at their tags: a run resumed from a
snapshot continues exactly as the uninterrupted run. A stop (timeout, target reached,
Ctrl-C) joins the pending updates: ``model.pt`` holds every update started and
``losses.csv`` their rows (a Ctrl-C cuts the running one short after its current minibatch,
as in a synchronous run). An update that raises is reported at the learner's next tag, as a
failure of the reaction that started it, with the update's traceback.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from queue import SimpleQueue
from threading import Thread
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .config import ConfigError
from .device import batch_to_device, torch_threads
from .gae import compute_gae
from .networks import Weights
from .vtrace import compute_vtrace

if TYPE_CHECKING:
    from .envs import EnvStep

#: a rl_algos.ppo.PPOLearner (which imports this module: named, not imported, here)
PPOLearner = Any

#: the corrections ``off_policy`` names (see the module docstring)
OFF_POLICY = ("ratio", "vtrace")

#: rows of a rollout evaluated in one forward pass at the start of a lagged update
_EVAL_ROWS = 512


def check_lag(policy_lag: object, off_policy: object) -> int:
    """``policy_lag`` when it and ``off_policy`` are valid: a non-negative integer and one
    of :data:`OFF_POLICY`. Raises :class:`~rl_algos.config.ConfigError` naming the
    parameter otherwise."""
    if isinstance(policy_lag, bool) or not isinstance(policy_lag, int) or policy_lag < 0:
        raise ConfigError(f"policy_lag = {policy_lag!r}: must be a non-negative integer")
    if off_policy not in OFF_POLICY:
        raise ConfigError(f"off_policy = {off_policy!r}: must be one of {', '.join(OFF_POLICY)}")
    return policy_lag


@dataclass
class UpdateReport:
    """One update's outcome, what the learner reactor sends and logs: the new ``weights``
    (None once sent),
    the mean ``stats`` of its minibatches, the ``learning_rate`` it used, ``env_steps`` (the
    environment steps of the rollouts it trained on), ``rollout`` (its index, from 0), and
    when it ran, ``started_ns`` and ``ended_ns`` (``perf_counter_ns``; 0 for an update made
    inside the tag's reaction)."""

    weights: Weights | None
    stats: dict[str, float]
    learning_rate: float
    env_steps: int
    rollout: int
    started_ns: int = 0
    ended_ns: int = 0


@dataclass
class Rollout:
    """A complete rollout handed to a background update: the learner's storage ``buf``
    (arrays (T, E, ...), see :class:`rl_algos.ppo.PPOLearner`), ``last_obs`` (E, *obs_shape)
    the observations after it, ``cut``: (t, env indices, their final observations) of every
    time-limit truncation (bootstrapped at the update), ``env_steps`` at its end and its
    index ``index``."""

    buf: dict[str, np.ndarray]
    last_obs: np.ndarray
    cut: list[tuple[int, np.ndarray, np.ndarray]]
    env_steps: int
    index: int


class BackgroundUpdates:
    """Updates started in order on one background thread, collected in that order (the
    learners' one runner: PPO's lagged updates here, GRPO's asynchronous layout,
    :class:`rl_algos.grpo.BackgroundUpdate`).

    :meth:`submit` queues a function; :meth:`collect` waits for the oldest and returns its
    result (an :class:`UpdateReport` for PPO). Pickling waits for every pending update and keeps their results (or raises the
    error of one that failed), so a snapshot holds finished work only; the thread is made
    again when the next update starts. The thread is a daemon: an idle one never holds up
    the end of its process (which waits for the threads that are not).
    """

    def __init__(self) -> None:
        self.pending: deque[Any] = deque()  # Futures, or results once finished
        self._queue: SimpleQueue[tuple[Future, Callable[[], Any]]] | None = None

    def __len__(self) -> int:
        return len(self.pending)

    def submit(self, fn: Callable[[], Any]) -> None:
        """Start ``fn`` once the updates submitted before it have run."""
        if self._queue is None:
            self._queue = SimpleQueue()
            Thread(
                target=_serve, args=(self._queue,), name="lf-learner-update", daemon=True
            ).start()
        future: Future = Future()
        self._queue.put((future, fn))
        self.pending.append(future)

    def collect(self) -> Any:
        """The oldest update's report, waiting for it. Raises what the update raised (with
        a note saying it ran in the background); IndexError when none is pending."""
        return _result(self.pending.popleft())

    def raise_failed(self) -> None:
        """Raise the error of a pending update that already failed (nothing otherwise; never
        waits)."""
        for item in self.pending:
            if isinstance(item, Future) and item.done() and item.exception() is not None:
                _result(item)

    def wait(self) -> None:
        """Wait until no update is running, without raising what one raised (that is
        reported where it is collected)."""
        for item in self.pending:
            if isinstance(item, Future):
                item.exception()

    def finish(self) -> None:
        """Wait for every pending update; their reports stay pending, in order."""
        self.pending = deque(_result(item) for item in self.pending)

    def __getstate__(self) -> dict[str, Any]:
        """The reports of the pending updates, once all have finished."""
        self.finish()
        return {"pending": list(self.pending)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Pending reports as saved; the thread starts with the next update."""
        self.pending = deque(state["pending"])
        self._queue = None


def _serve(queue: SimpleQueue[tuple[Future, Callable[[], Any]]]) -> None:
    """The background thread: run each queued function, in order, into its future."""
    while True:
        future, fn = queue.get()
        try:
            future.set_result(fn())
        except BaseException as e:
            future.set_exception(e)


def _result(item: Any) -> Any:
    """The result of a pending item (waiting for a running one), or the item itself when it
    is one already; raises what the update raised, noted as a background update's."""
    if not isinstance(item, Future):
        return item
    try:
        return item.result()
    except BaseException as e:
        if not any("background update" in n for n in getattr(e, "__notes__", ())):
            e.add_note("(in the learner's background update: rl_algos.lag.BackgroundUpdates)")
        raise


class LaggedPPO:
    """The lagged schedule of a :class:`rl_algos.ppo.PPOLearner` (``cfg.policy_lag`` =
    ``lag`` >= 1): the learner's :meth:`~rl_algos.ppo.PPOLearner.observe` hands each tag to
    :meth:`observe`."""

    def __init__(self, lag: int) -> None:
        self.lag = lag
        self.updates = BackgroundUpdates()
        self.cut: list[tuple[int, np.ndarray, np.ndarray]] = []  # of the rollout being filled
        self.rollouts = 0  # rollouts handed to updates

    def observe(
        self,
        learner: PPOLearner,
        step: EnvStep,
        record: Any,
        stop: Callable[[], bool],
    ) -> UpdateReport | None:
        """Store one tag's data and the ``record`` (an :class:`rl_algos.ppo.ActRecord` or
        None) of the actions that led to it (see :meth:`rl_algos.ppo.PPOLearner.observe`);
        at the end of a rollout start its update and return the report of the update ``lag``
        rollouts older, if any. Raises the error of an update that failed."""
        self.updates.raise_failed()
        if not learner.buf:
            learner._allocate(step.obs)
        if record is not None:
            if step.final_obs is not None and step.truncated.any():
                cut = np.flatnonzero(step.truncated & ~step.terminated)
                if len(cut):
                    self.cut.append((learner.t, cut, step.final_obs[cut].copy()))
            learner.store(record, step.reward.astype(np.float32), step.done)
        report = None
        if learner.t == learner.cfg.num_steps:
            rollout = Rollout(learner.buf, np.array(step.obs), self.cut, learner.env_steps, 0)
            rollout.index, self.rollouts = self.rollouts, self.rollouts + 1
            learner.buf, learner.t, self.cut = {}, 0, []
            learner._allocate(step.obs)
            self.updates.submit(lambda: lagged_update(learner, rollout, stop))
            if len(self.updates) > self.lag:
                report = self.updates.collect()
        learner.buf["obs"][learner.t] = step.obs
        return report

    def finish(self) -> list[UpdateReport]:
        """Wait for every pending update and return their reports, oldest first (none
        pending afterwards)."""
        self.updates.finish()
        reports = [self.updates.collect() for _ in range(len(self.updates))]
        return reports


def lagged_update(learner: PPOLearner, rollout: Rollout, stop: Callable[[], bool]) -> UpdateReport:
    """Update ``learner`` on ``rollout`` (on the background thread): the values and the
    truncations' bootstraps from its network as it is now, the advantages and targets of
    ``cfg.off_policy``, the minibatch epochs, then its weights (copied: the next update
    changes the network)."""
    started = perf_counter_ns()
    cfg, b = learner.cfg, rollout.buf
    rewards = b["rewards"]
    with torch_threads(cfg.update_threads):
        values, log_rhos, last_value = evaluate(learner, rollout)
        for t, cut, final_obs in rollout.cut:
            rewards[t, cut] += cfg.gamma * learner.value(final_obs)
    b["values"] = values
    if cfg.off_policy == "vtrace":
        adv, ret = compute_vtrace(
            rewards, values, b["dones"], last_value, log_rhos, cfg.gamma, cfg.gae_lambda
        )
    else:
        adv, ret = compute_gae(rewards, values, b["dones"], last_value, cfg.gamma, cfg.gae_lambda)
    stats = learner.update_on(b, adv, ret, stop, rollout.env_steps)
    weights = learner.weights()
    lr = learner.opt.lr
    return UpdateReport(
        weights, dict(stats), lr, rollout.env_steps, rollout.index, started, perf_counter_ns()
    )


def evaluate(learner: PPOLearner, rollout: Rollout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The learner network's V(s_t) (T, E) float32 and log pi(a_t|s_t) - log mu(a_t|s_t)
    (T, E) float32 of the rollout's actions (zeros unless ``off_policy`` is ``"vtrace"``),
    and V of the state after it, (E,) float32."""
    b = rollout.buf
    t, e = b["values"].shape
    n = t * e
    obs, actions = b["obs"].reshape(n, *b["obs"].shape[2:]), b["actions"].reshape(n, -1)
    values, logp = np.zeros(n, np.float32), np.zeros(n, np.float32)
    with torch.inference_mode():
        for s in range(0, n, _EVAL_ROWS):
            d = batch_to_device({"o": obs[s : s + _EVAL_ROWS]}, learner.device)
            out, v = learner.net(d["o"])
            values[s : s + len(v)] = v.cpu().numpy()
            if learner.cfg.off_policy == "vtrace":
                a = torch.as_tensor(actions[s : s + _EVAL_ROWS]).to(learner.device)
                lp, _ = learner._logp_entropy(out, a if learner.continuous else a[:, 0])
                logp[s : s + len(v)] = lp.cpu().numpy()
    log_rhos = (logp - b["logp"].reshape(n)) if learner.cfg.off_policy == "vtrace" else logp
    return values.reshape(t, e), log_rhos.reshape(t, e), learner.value(rollout.last_obs)
