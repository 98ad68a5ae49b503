"""Proximal Policy Optimization with the clipped objective, for discrete and continuous actions.

Source: Schulman, Wolski, Dhariwal, Radford, Klimov (2017), "Proximal Policy Optimization
Algorithms", arXiv:1707.06347: the clipped surrogate L^CLIP (eq. 7) plus c1 * value loss minus
c2 * entropy (eq. 9), advantages by GAE (eq. 11-12, see :mod:`rl_algos.gae`), K epochs of
minibatch Adam over each rollout of T steps from N parallel actors (Algorithm 1). The
defaults of :class:`PPOConfig` are the paper's MuJoCo settings (Table 3); the Atari ones
(Table 5) are T=128, lr 2.5e-4 annealed, K=3, minibatch 256, clip 0.1 annealed, c1=1,
c2=0.01. Gradient-norm clipping (0.5), Adam eps 1e-5 and per-minibatch advantage
normalisation are the OpenAI baselines choices the paper's results were produced with.

Continuous (Box) action spaces get the paper's Gaussian policy (section 6.1): an MLP gives the
mean, a state-independent parameter the log standard deviation
(:class:`rl_algos.networks.GaussianActorCritic`); log-probabilities are those of the sampled,
unclipped action (the environment group clips it to the space's bounds), summed over the
action's dimensions. A user's module may replace the built-in actor-critic
(``PPOConfig.network``, :mod:`rl_algos.custom_network`).

Split for reactors: :class:`PPOActor` samples actions for a batch of observations (in a
policy reactor); :class:`PPOLearner` gathers the rollout tag by tag and updates the network
(in a learner reactor), returning new :class:`rl_algos.networks.Weights` to broadcast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .custom_network import CustomNetwork, custom_network
from .device import batch_to_device, choose_device, torch_threads
from .device_weights import export_device_weights, load_device_weights
from .distributions import gaussian_logp_entropy, log_softmax, sample_categorical, sample_gaussian
from .envs import EnvStep, concat_steps
from .gae import compute_gae
from .lag import LaggedPPO, UpdateReport, check_lag
from .networks import (
    GaussianActorCritic,
    NumpyActorCritic,
    Weights,
    actor_critic,
    export_weights,
    kind_of,
    load_weights,
    numpy_actor_critic,
)
from .normalize import ObsStats
from .optim import Adam, clip_grad_norm
from .seeding import torch_generator


@dataclass
class PPOConfig:
    """Hyperparameters (paper defaults: Schulman et al. 2017, Table 3)."""

    learning_rate: float = 3e-4  # Adam step size
    anneal_lr: bool = False  # linearly to 0 over total_steps (paper's Atari setting)
    num_steps: int = 2048  # horizon T: steps per environment per rollout
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE parameter
    update_epochs: int = 10  # K epochs per rollout
    minibatch_size: int = 64  # transitions per minibatch
    clip_coef: float = 0.2  # epsilon of the clipped ratio
    anneal_clip: bool = False  # epsilon linearly to 0 over total_steps, as the learning rate
    vf_coef: float = 1.0  # c1
    ent_coef: float = 0.0  # c2
    max_grad_norm: float = 0.5  # global gradient-norm clip (baselines)
    adam_eps: float = 1e-5  # Adam epsilon (baselines)
    norm_adv: bool = True  # normalise advantages per minibatch
    total_steps: int = 1_000_000  # environment steps of the whole run (for annealing)
    hidden: tuple = (64, 64)  # MLP widths (vector observations)
    activation: str = "tanh"
    # a user's actor-critic, "module:function" (rl_algos.custom_network); "": the built-in one
    network: str = ""
    network_kwargs: dict = field(default_factory=dict)  # keyword arguments of that function
    device: str = "auto"  # learner device: cuda if available, else cpu
    # torch's CPU threads during an update (a fixed count: the numbers depend on it, never on
    # the worker count); the other workers wait for the new weights meanwhile
    update_threads: int = 1
    policy_lag: int = 0  # rollouts acted while an update runs (rl_algos.lag); 0: synchronous
    off_policy: str = "ratio"  # advantages under a lag: "ratio" (GAE) or "vtrace" (rl_algos.lag)


@dataclass
class ActRecord:
    """What a policy reactor sends to its learner after acting on B observations:
    ``actions`` (B,) int64 (discrete) or (B, action_dim) float32 (continuous, unclipped),
    ``logp`` (B,) float32 log pi(a|s), ``values`` (B,) float32 V(s)."""

    actions: np.ndarray
    logp: np.ndarray
    values: np.ndarray


def concat_records(records: Sequence[ActRecord]) -> ActRecord:
    """One ActRecord for several policy reactors (a bank, each acting on its own environment
    reactors), their rows joined in the given order; a single record is returned as is.
    ValueError for an empty sequence."""
    if not records:
        raise ValueError("concat_records() needs at least one ActRecord")
    if len(records) == 1:
        return records[0]
    return ActRecord(
        np.concatenate([r.actions for r in records]),
        np.concatenate([r.logp for r in records]),
        np.concatenate([r.values for r in records]),
    )


def never() -> bool:
    """The default ``stop`` of :meth:`PPOLearner.update`: never asked to stop."""
    return False


def ppo_network(
    cfg: PPOConfig,
    obs_space: gym.spaces.Box,
    action_space: gym.Space,
    generator: torch.Generator,
) -> nn.Module:
    """The actor-critic of ``cfg``: the user's module of ``cfg.network`` (role
    ``"actor_critic"``, :mod:`rl_algos.custom_network`) or else the built-in one for the
    action space (:func:`rl_algos.networks.actor_critic`); initial weights from ``generator``.

    Raises:
        ConfigError: a custom network that cannot be built or misses the interface.
        TypeError: no built-in actor-critic for the action space (Discrete or Box).
    """
    if cfg.network:
        spaces = (obs_space, action_space)
        return custom_network(cfg.network, cfg.network_kwargs, spaces, "actor_critic", generator)
    return actor_critic(obs_space.shape, action_space, cfg.hidden, cfg.activation, generator)


def gaussian_log_std(net: nn.Module) -> torch.Tensor | None:
    """The log standard deviation, (1, A) or (A,) float32, of an actor-critic ``net`` that is
    a Gaussian policy (for a Box action space: its first output is the mean); None for a
    categorical one (its first output is the logits)."""
    gaussian = isinstance(net, GaussianActorCritic) or (
        isinstance(net, CustomNetwork) and net.continuous
    )
    return cast(torch.Tensor, net.log_std) if gaussian else None


class PPOActor:
    """Acting side: holds a copy of the actor-critic, loaded from broadcast weights.

    ``device``: where the copy runs, ``"cpu"`` (the default: small networks act fastest
    there), ``"cuda"`` or ``"auto"`` (:func:`~rl_algos.device.choose_device`; ValueError for
    another name); on a GPU the observations go there in one host-to-device copy per act and
    the results come back to the CPU, where actions are sampled from ``rng``.
    ``act(obs)`` takes (B, *obs_shape) observations and returns an :class:`ActRecord` of
    numpy arrays; RuntimeError before the first :meth:`load`. ``threads``: torch's CPU
    threads during the forward pass (see :func:`~rl_algos.device.torch_threads`).
    """

    def __init__(
        self, rng: np.random.Generator, device: str = "cpu", threads: int = 1, **_config: Any
    ) -> None:
        self.rng = rng
        self.device = choose_device(device)
        self.threads = threads
        self.net: nn.Module | None = None
        self.numpy_net: NumpyActorCritic | None = None

    def load(self, weights: Weights) -> None:
        """Replace the network's parameters with ``weights`` (a Weights): an MLP
        actor-critic on the CPU as a :class:`NumpyActorCritic`, any other as a torch
        network (``net``) on the actor's device: device to device from
        :class:`~rl_algos.device_weights.DeviceWeights` on that device, else from the host."""
        self.numpy_net = numpy_actor_critic(weights) if self.device.type == "cpu" else None
        if self.numpy_net is None and not load_device_weights(weights, self.net):
            self.net = load_weights(weights, self.net).to(self.device)

    def act(self, obs: np.ndarray) -> ActRecord:
        if self.numpy_net is not None:  # MLPs on the CPU act in numpy
            logits, values = self.numpy_net(obs)
            return self._categorical(log_softmax(logits), values)
        if self.net is None:
            raise RuntimeError("PPOActor.act() before any weights were received")
        with torch.inference_mode(), torch_threads(self.threads):
            if self.device.type == "cpu":
                x = torch.as_tensor(obs)
            else:
                x = batch_to_device({"obs": obs}, self.device)["obs"]
            out, values = self.net(x)
            out, values = out.cpu(), values.cpu().numpy().astype(np.float32)
            log_std = gaussian_log_std(self.net)
            if log_std is not None:
                actions, logp = sample_gaussian(out, log_std.cpu(), self.rng)
                return ActRecord(actions, logp, values)
            logp_all = torch.log_softmax(out, dim=-1).numpy()
        return self._categorical(logp_all, values)

    def _categorical(self, logp_all: np.ndarray, values: np.ndarray) -> ActRecord:
        """Actions drawn from the (B, A) log-probabilities, with their log-probabilities and
        the (B,) values."""
        actions = sample_categorical(logp_all, self.rng)
        logp = np.take_along_axis(logp_all, actions[:, None], axis=1)[:, 0]
        return ActRecord(actions, logp.astype(np.float32), values)


class PPOLearner:
    """Learning side: the rollout storage, GAE and the clipped-objective update.

    ``obs_space``/``action_space``: gymnasium spaces (Discrete or Box actions; TypeError
    otherwise; ConfigError for a user's ``cfg.network`` that does not fit, see
    :func:`ppo_network`); ``rng``: the learner reactor's generator (minibatch order);
    ``torch_seed``: int for the network's initialisation; ``net``: a network to train instead of the
    actor-critic of the spaces (``forward(obs)`` giving the logits, or a Gaussian's mean, and
    the values, as :class:`~rl_algos.networks.ActorCritic`; the multi-agent learners of
    :mod:`rl_algos.mappo` pass theirs). Call :meth:`observe` once per tag. ``obs_stats``: the
    observation scaling the rollout was normalised with (set by the owner), saved in the
    checkpoint. With ``cfg.policy_lag`` > 0 the updates run on a background thread
    (:class:`rl_algos.lag.LaggedPPO`); pickling the learner waits for them (a snapshot holds
    their results); ConfigError for a ``policy_lag`` or ``off_policy`` that is not valid.
    """

    def __init__(
        self,
        cfg: PPOConfig,
        obs_space: gym.spaces.Box,
        action_space: gym.Space,
        rng: np.random.Generator,
        torch_seed: int,
        net: nn.Module | None = None,
    ) -> None:
        self.cfg, self.rng = cfg, rng
        self.device = choose_device(cfg.device)
        if net is None:
            net = ppo_network(cfg, obs_space, action_space, torch_generator(torch_seed))
        self.net = net.to(self.device)
        self.continuous = gaussian_log_std(self.net) is not None
        self.action_dim = int(np.prod(action_space.shape or ()))  # 1 for a Discrete space
        self.opt = Adam(self.net.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps)
        self.obs_space = obs_space
        self.buf: dict[str, np.ndarray] = {}  # rollout arrays, allocated on the first observation
        self.t = 0  # next slot of the rollout
        self.env_steps = 0
        self.updates = 0
        self.stats: dict[str, float] = {}
        self.obs_stats: ObsStats | None = None
        lag = check_lag(cfg.policy_lag, cfg.off_policy)
        self.lagged = LaggedPPO(lag) if lag else None
        self.report: UpdateReport | None = None  # of the update whose weights observe() returned

    def __getstate__(self) -> dict[str, Any]:
        """The learner's attributes, once its background updates (if any) have finished."""
        if self.lagged is not None:
            self.lagged.updates.finish()
        return dict(vars(self))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`__getstate__` saved (a learner saved before policy lags
        existed had none: synchronous)."""
        vars(self).update({"lagged": None, "report": None, **state})

    def finish_updates(self) -> list[UpdateReport]:
        """Wait for the updates still running in the background (``policy_lag`` > 0) and
        return their reports, oldest first; their weights are never sent (the run ends)."""
        return [] if self.lagged is None else self.lagged.finish()

    def weights(self) -> Weights:
        """The current network as :class:`rl_algos.networks.Weights`; on a GPU as
        :class:`~rl_algos.device_weights.DeviceWeights`, left there for a policy on it."""
        if self.device.type == "cuda" and torch.cuda.is_available():
            return export_device_weights(self.net, self.updates)
        return export_weights(self.net, kind_of(self.net), self.updates)

    def checkpoint(self) -> dict:
        """What ``model.pt`` holds: ``algo``, ``kind`` and ``spec`` of the network (to rebuild
        it), its ``state_dict`` (CPU tensors), the ``config`` (a dict), ``env_steps`` and
        ``updates``; and ``obs_norm`` (:meth:`rl_algos.normalize.ObsStats.to_dict`) when
        observations were normalised. Waits for the background updates first."""
        if self.lagged is not None:
            self.lagged.updates.wait()
        state = {k: v.cpu() for k, v in self.net.state_dict().items()}
        norm = {} if self.obs_stats is None else {"obs_norm": self.obs_stats.to_dict()}
        return {
            **norm,
            "algo": "ppo",
            "kind": kind_of(self.net),
            "spec": self.net.spec,
            "state_dict": state,
            "config": asdict(self.cfg),
            "env_steps": self.env_steps,
            "updates": self.updates,
        }

    def observe(
        self, env_steps: list[EnvStep], record: ActRecord | None, stop: Callable[[], bool] = never
    ) -> Weights | None:
        """Take one tag's data; returns new Weights after an update, else None.

        ``env_steps``: the EnvSteps of every environment group at this tag (group order),
        the result of the actions in ``record``; ``record``: what the policy did on the
        previous observations (None at the first tag); ``stop``: see :meth:`update`. A
        time-limit truncation is bootstrapped: gamma * V(final observation) is added to its
        reward. With a policy lag, the Weights are those of the update started ``policy_lag``
        rollouts ago. :attr:`report` describes the update whose Weights were returned.
        """
        step = concat_steps(env_steps)
        if self.lagged is not None:
            report = self.lagged.observe(self, step, record, stop)
            if report is None:
                return None
            self.report = replace(report, weights=None)  # the weights leave, not kept twice
            return report.weights
        if not self.buf:
            self._allocate(step.obs)
        if record is not None:
            reward = step.reward.astype(np.float32)
            if step.final_obs is not None and step.truncated.any():
                cut = np.flatnonzero(step.truncated & ~step.terminated)
                if len(cut):
                    reward[cut] += self.cfg.gamma * self.value(step.final_obs[cut])
            self.store(record, reward, step.done)
        update = self.t == self.cfg.num_steps
        if update:
            self.update(self.value(step.obs), stop)
            self.t = 0
        self.buf["obs"][self.t] = step.obs
        if update:
            n, lr = self.updates - 1, self.opt.lr
            self.report = UpdateReport(None, self.stats, lr, self.env_steps, n)
        return self.weights() if update else None

    def store(self, record: ActRecord, reward: np.ndarray, done: np.ndarray) -> None:
        """Put one step of the rollout into the next slot: the policy's ``record`` of the
        actions, their (E,) float32 ``reward`` and (E,) bool ``done``."""
        b, t = self.buf, self.t
        b["actions"][t], b["logp"][t], b["values"][t] = record.actions, record.logp, record.values
        b["rewards"][t], b["dones"][t] = reward, done
        self.t += 1
        self.env_steps += len(reward)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """V(obs) for (B, *obs_shape) observations; (B,) float32."""
        with torch.inference_mode():
            return self.net(batch_to_device({"o": obs}, self.device)["o"])[1].cpu().numpy()

    def _allocate(self, obs: np.ndarray) -> None:
        t, e = self.cfg.num_steps, obs.shape[0]
        actions: np.ndarray
        if self.continuous:
            actions = np.zeros((t, e, self.action_dim), np.float32)
        else:
            actions = np.zeros((t, e), np.int64)
        self.buf = {
            "obs": np.zeros((t, *obs.shape), obs.dtype),
            "actions": actions,
            "logp": np.zeros((t, e), np.float32),
            "values": np.zeros((t, e), np.float32),
            "rewards": np.zeros((t, e), np.float32),
            "dones": np.zeros((t, e), bool),
        }

    def update(self, last_value: np.ndarray, stop: Callable[[], bool] = never) -> dict:
        """K epochs of minibatch updates on the full rollout; returns mean statistics.
        ``stop`` is asked after each minibatch: once it answers True (a signal is ending the
        run), the update ends there, with the statistics of the minibatches done."""
        cfg, b = self.cfg, self.buf
        adv, ret = compute_gae(
            b["rewards"], b["values"], b["dones"], last_value, cfg.gamma, cfg.gae_lambda
        )
        return self.update_on(b, adv, ret, stop, self.env_steps)

    def update_on(
        self,
        b: dict[str, np.ndarray],
        adv: np.ndarray,
        ret: np.ndarray,
        stop: Callable[[], bool],
        env_steps: int,
    ) -> dict:
        """K epochs of minibatch updates on the rollout ``b`` (the arrays of
        :meth:`_allocate`) with its (T, E) float32 advantages ``adv`` and value targets
        ``ret``; the policy's ratio is taken against the rollout's ``logp``; ``env_steps``:
        the run's steps at the rollout's end (for the annealing). Returns mean statistics;
        ``stop`` as in :meth:`update`."""
        cfg = self.cfg
        n = adv.size
        perms = np.stack([self.rng.permutation(n) for _ in range(cfg.update_epochs)])
        d = batch_to_device(
            {
                "obs": b["obs"].reshape(n, *b["obs"].shape[2:]),
                "actions": b["actions"].reshape(n, *b["actions"].shape[2:]),
                # one (3, n) array: a minibatch takes its rows of all three in one gather
                "scalars": np.stack([b["logp"].reshape(n), adv.reshape(n), ret.reshape(n)]),
                "perms": perms,
            },
            self.device,
        )
        with torch_threads(cfg.update_threads):
            if d["obs"].dim() == 4:  # frames: (n, C, H, W) stored as (n, H, W, C) once
                d = {**d, "obs": d["obs"].permute(0, 2, 3, 1).contiguous()}
            return self._update(d, n, stop, env_steps)

    def _update(
        self, d: dict[str, torch.Tensor], n: int, stop: Callable[[], bool], env_steps: int
    ) -> dict:
        """The minibatch steps of :meth:`update` on the ``n`` transitions ``d`` (on the
        device, with the epochs' permutations), annealed for ``env_steps``."""
        cfg = self.cfg
        frac = max(0.0, 1.0 - env_steps / cfg.total_steps)
        if cfg.anneal_lr:
            self.opt.lr = frac * cfg.learning_rate
        clip = frac * cfg.clip_coef if cfg.anneal_clip else cfg.clip_coef
        losses: list[torch.Tensor] = []
        log_ratios: list[torch.Tensor] = []
        for epoch in range(cfg.update_epochs):
            for start in range(0, n, cfg.minibatch_size):
                if losses and stop():
                    break
                idx = d["perms"][epoch, start : start + cfg.minibatch_size]
                loss_row, log_ratio = self._minibatch(d, idx, clip)
                losses.append(loss_row)
                log_ratios.append(log_ratio)
        self.updates += 1
        rows = torch.cat([torch.stack(losses), ratio_stats(log_ratios, clip)], dim=1)
        names = ("pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")
        self.stats = dict(zip(names, mean_rows(rows)))
        return self.stats

    def _minibatch(
        self, d: dict, idx: torch.Tensor, clip: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One Adam step on the transitions ``idx`` of the rollout ``d`` with the ratio
        clipped to 1 +- ``clip``. Returns its (3,) float32 policy loss, value loss and
        entropy, and its (B,) float32 log-ratios (for :func:`ratio_stats`), both detached
        and left as tensors so that a whole update reads them back at once."""
        cfg = self.cfg
        obs, actions = d["obs"].index_select(0, idx), d["actions"].index_select(0, idx)
        if obs.dim() == 4:  # back to (B, C, H, W), channels-last in memory (NatureCNN's layout)
            obs = obs.permute(0, 3, 1, 2)
        old_logp, adv, ret = d["scalars"].index_select(1, idx)
        out, value = self.net(obs)
        logp, entropy = self._logp_entropy(out, actions)
        log_ratio = logp - old_logp
        ratio = log_ratio.exp()
        if cfg.norm_adv and len(idx) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        neg_adv = -adv
        pg_loss = torch.max(neg_adv * ratio, neg_adv * ratio.clamp(1 - clip, 1 + clip)).mean()
        v_loss = 0.5 * F.mse_loss(value, ret)
        value_term = cfg.vf_coef * v_loss
        if cfg.ent_coef:
            loss = pg_loss - cfg.ent_coef * entropy + value_term
        else:  # a zero coefficient adds nothing: its gradient is not computed
            loss = pg_loss + value_term
        self.opt.zero_grad()
        loss.backward()
        clip_grad_norm(self.opt.params, cfg.max_grad_norm)
        self.opt.step()
        with torch.no_grad():
            return torch.stack([pg_loss, v_loss, entropy]), log_ratio.detach()

    def _logp_entropy(
        self, out: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(actions) (B,) and the mean entropy (a scalar) from the policy head's
        output: the Gaussian's mean, or the logits."""
        if self.continuous:
            log_std = cast(torch.Tensor, self.net.log_std)
            logp, entropy = gaussian_logp_entropy(out, log_std, actions)
            return logp, entropy.mean()
        logp_all = torch.log_softmax(out, dim=-1)
        logp = logp_all.gather(1, actions[:, None]).squeeze(1)
        return logp, -(logp_all.exp() * logp_all).sum(-1).mean()


def ratio_stats(log_ratios: list[torch.Tensor], clip: float) -> torch.Tensor:
    """The approximate KL divergence and the clip fraction of each minibatch, (K, 2) float32,
    from its (B,) log-ratios log pi_new(a|s) - log pi_old(a|s): the KL estimate
    mean((r - 1) - log r) (J. Schulman, "Approximating KL divergence", 2020, as CleanRL logs
    it) and the fraction of ratios r outside 1 +- ``clip``. Minibatches of one size are
    computed together, a few ops for all of them."""
    if len({len(x) for x in log_ratios}) > 1:  # a short last minibatch: one at a time
        return torch.cat([ratio_stats([x], clip) for x in log_ratios])
    log_ratio = torch.stack(log_ratios)
    excess = log_ratio.exp() - 1
    kl = (excess - log_ratio).mean(1)
    clipfrac = (excess.abs() > clip).float().mean(1)
    return torch.stack([kl, clipfrac], dim=1)


def mean_rows(rows: torch.Tensor) -> np.ndarray:
    """The mean of the (K, S) float32 statistics of K minibatches, (S,) float64, summed in
    float64 one row after another (the order fixes the result's last bits)."""
    values = rows.cpu().numpy().astype(np.float64)
    return np.cumsum(values, axis=0)[-1] / len(values)
