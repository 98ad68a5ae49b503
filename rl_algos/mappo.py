"""Multi-agent PPO: MAPPO (a centralised critic) and independent PPO (IPPO), for discrete
actions, on the slots of :mod:`rl_algos.multiagent_env`.

Source: Yu, Velu, Vinitsky, Gao, Wang, Bayen, Wu (2022), "The Surprising Effectiveness of PPO
in Cooperative Multi-Agent Games", NeurIPS Datasets and Benchmarks: decentralised actors,
each acting on its own observation, and a value function that sees the global state during
training (centralised training, decentralised execution); PPO's clipped objective
(Schulman et al. 2017) on every agent's transitions, with GAE; parameter sharing between
agents, the agent's one-hot id in its inputs. ``critic = "local"`` gives each agent's critic
its own observation instead: independent PPO (IPPO; de Witt et al. 2020, "Is Independent
Learning All You Need in the StarCraft Multi-Agent Challenge?"). The defaults of
:class:`MAPPOConfig` are the paper's for the particle environments (its Tables 13-14) where
they fit a short run on a CPU; it normalises values with PopArt, we do not.

Each agent slot of each environment is one **row**: ``[observation | one-hot slot | global
state]`` (:func:`agent_rows`), float32. The actor reads the first two parts, a centralised
critic the last two, a local critic the first two. The update is PPO's own
(:meth:`rl_algos.ppo.PPOLearner.update_on`) on the rows of live agents only: an absent
slot's row is padding, excluded from the loss, and cuts GAE's recursion (done). Split for
reactors like :mod:`rl_algos.ppo`: :class:`MAPPOActor` acts for every row of a batch in one
forward pass (the policy reactor), :class:`MAPPOLearner` gathers the rollout tag by tag and
updates (the learner reactor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from .config import ConfigError
from .device import torch_threads
from .distributions import sample_categorical
from .gae import compute_gae
from .multiagent_env import AgentSpaces, MultiAgentStep, concat_agent_steps
from .networks import Weights, export_weights, load_weights, mlp
from .ppo import ActRecord, PPOConfig, PPOLearner, never
from .seeding import torch_generator

#: The critics a config may ask for: "centralised" (MAPPO) or "local" (IPPO).
CRITICS = ("centralised", "local")
#: The ``kind`` of the Weights of a :class:`MultiAgentActorCritic`.
KIND = "multi_agent_actor_critic"


@dataclass
class MAPPOConfig(PPOConfig):
    """Hyperparameters: PPO's (:class:`rl_algos.ppo.PPOConfig`) with the MAPPO paper's MPE
    values (Yu et al. 2022, Tables 13-14: lr 7e-4, 10 epochs, clip 0.2, gamma 0.99, GAE 0.95,
    entropy 0.01, 64-unit ReLU layers, gradient norm 10, episodes of 25 steps as rollouts),
    and the two multi-agent choices. ``policy_lag`` must stay 0 (synchronous)."""

    learning_rate: float = 7e-4
    num_steps: int = 25
    update_epochs: int = 10
    minibatch_size: int = 1200
    ent_coef: float = 0.01
    vf_coef: float = 1.0
    max_grad_norm: float = 10.0
    activation: str = "relu"
    device: str = "cpu"
    share_parameters: bool = True  # one actor and one critic for every agent (else one each)
    critic: str = "centralised"  # "centralised": MAPPO; "local": independent PPO (IPPO)


def check_config(cfg: MAPPOConfig) -> MAPPOConfig:
    """``cfg`` once its multi-agent choices are known valid.

    Raises:
        ConfigError: ``critic`` is not one of :data:`CRITICS`, ``policy_lag`` is not 0, or a
            custom ``network`` is named.
    """
    if cfg.critic not in CRITICS:
        raise ConfigError(f"critic must be one of {', '.join(CRITICS)}, not {cfg.critic!r}")
    if cfg.network:
        raise ConfigError(
            f"multi-agent PPO trains its own networks: network must be empty, not {cfg.network!r}"
        )
    if cfg.policy_lag:
        raise ConfigError(
            f"multi-agent PPO is synchronous: policy_lag must be 0, not {cfg.policy_lag}"
        )
    return cfg


def agent_rows(obs: np.ndarray, state: np.ndarray) -> np.ndarray:
    """The rows of E environments of N agent slots: ``obs`` (E, N, D) float32 and ``state``
    (E, S) float32 -> (E * N, D + N + S) float32, row ``e * N + i`` being slot i's observation,
    its one-hot id and environment e's global state."""
    e, n, _ = obs.shape
    ids = np.broadcast_to(np.eye(n, dtype=np.float32), (e, n, n))
    states = np.broadcast_to(state[:, None, :], (e, n, state.shape[1]))
    return np.concatenate([obs, ids, states], axis=2).reshape(e * n, -1)


class MultiAgentActorCritic(nn.Module):
    """Actors and critics of N agents on rows of :func:`agent_rows` (obs_dim D, state_dim S).

    ``forward(rows)`` takes (B, D + N + S) float32 and returns ``(logits (B, n_actions),
    values (B,))`` float32. The actor reads ``rows[:, :D + N]``; the critic ``rows[:, D:]``
    (the one-hot id and the global state) when ``centralised``, else the actor's input.
    ``share``: one actor MLP and one critic MLP for every agent; otherwise one of each per
    agent, a row going through its own agent's (picked by its one-hot id). Orthogonal
    initialisation (:func:`rl_algos.networks.mlp`), drawn from ``generator``.
    """

    def __init__(
        self,
        obs_dim: int,
        n_agents: int,
        state_dim: int,
        n_actions: int,
        hidden: Sequence[int] = (64, 64),
        activation: str = "relu",
        share: bool = True,
        centralised: bool = True,
        *,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.spec = dict(
            obs_dim=int(obs_dim),
            n_agents=int(n_agents),
            state_dim=int(state_dim),
            n_actions=int(n_actions),
            hidden=tuple(hidden),
            activation=activation,
            share=bool(share),
            centralised=bool(centralised),
        )
        self.obs_dim, self.actor_dim = obs_dim, obs_dim + n_agents
        self.critic_from = obs_dim if centralised else 0
        self.critic_to = obs_dim + n_agents + (state_dim if centralised else 0)
        copies = 1 if share else n_agents
        g = generator
        self.actors = nn.ModuleList(
            mlp(self.actor_dim, n_actions, g, hidden, activation, 0.01) for _ in range(copies)
        )
        critic_dim = self.critic_to - self.critic_from
        self.critics = nn.ModuleList(
            mlp(critic_dim, 1, g, hidden, activation, 1.0) for _ in range(copies)
        )

    def forward(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, n_actions) float32 logits and (B,) float32 values of B agent rows
        (:func:`agent_rows`: each agent's observation and id, then the critic's input)."""
        actor_in = rows[:, : self.actor_dim]
        critic_in = rows[:, self.critic_from : self.critic_to]
        if len(self.actors) == 1:
            return self.actors[0](actor_in), self.critics[0](critic_in).squeeze(-1)
        d = self.obs_dim
        pick = rows[:, d : d + len(self.actors), None]  # (B, N, 1): the row's one-hot id
        logits = torch.stack([a(actor_in) for a in self.actors], 1)
        values = torch.stack([c(critic_in) for c in self.critics], 1)
        return (logits * pick).sum(1), (values * pick).sum(1).squeeze(-1)


def build_network(spaces: AgentSpaces, cfg: MAPPOConfig, seed: int) -> MultiAgentActorCritic:
    """The network of ``cfg`` for the agents of ``spaces``, its weights drawn from ``seed``."""
    return MultiAgentActorCritic(
        spaces.obs_dim,
        spaces.n_agents,
        spaces.state_dim,
        spaces.n_actions,
        cfg.hidden,
        cfg.activation,
        cfg.share_parameters,
        cfg.critic == "centralised",
        generator=torch_generator(seed),
    )


def network_of(w: Weights, net: MultiAgentActorCritic | None = None) -> MultiAgentActorCritic:
    """``w`` (of kind :data:`KIND`) loaded into ``net``, built from ``w.spec`` when None.
    ValueError for Weights of another kind."""
    if w.kind != KIND:
        raise ValueError(f"weights of kind {w.kind!r}, not {KIND!r} (a multi-agent learner's)")
    if net is None:
        net = MultiAgentActorCritic(**w.spec, generator=torch.Generator())
    return load_weights(w, net)  # type: ignore[return-value]


class MAPPOActor:
    """Acting side: a copy of the network, loaded from broadcast weights, on the CPU.

    ``act(step)`` acts for every slot of a :class:`~rl_algos.multiagent_env.MultiAgentStep`
    of E environments in one forward pass and returns an :class:`rl_algos.ppo.ActRecord` of
    E * N rows (absent slots too: their actions are not sent to the environment), actions
    drawn from ``rng``. RuntimeError before the first :meth:`load`. ``threads``: torch's CPU
    threads during the forward pass.
    """

    def __init__(self, rng: np.random.Generator, threads: int = 1, **_config: Any) -> None:
        self.rng, self.threads = rng, threads
        self.net: MultiAgentActorCritic | None = None

    def load(self, weights: Weights) -> None:
        """Replace the network's parameters with ``weights``."""
        self.net = network_of(weights, self.net)

    def act(self, step: MultiAgentStep) -> ActRecord:
        """Sample an action for every agent slot of ``step`` ((K, N) environments by agents,
        absent agents included: their actions are not sent); the record's arrays have K * N
        rows, environment-major. RuntimeError before any weights were loaded."""
        if self.net is None:
            raise RuntimeError("MAPPOActor.act() before any weights were received")
        rows = torch.from_numpy(agent_rows(step.obs, step.state))
        with torch.inference_mode(), torch_threads(self.threads):
            logits, values = self.net(rows)
            logp_all = torch.log_softmax(logits, dim=-1).numpy()
        actions = sample_categorical(logp_all, self.rng)
        logp = np.take_along_axis(logp_all, actions[:, None], axis=1)[:, 0]
        return ActRecord(actions, logp.astype(np.float32), values.numpy().astype(np.float32))


class MAPPOLearner:
    """Learning side: the rollout of every agent row, GAE, and PPO's update on live rows.

    ``spaces``: the agents (:class:`~rl_algos.multiagent_env.AgentSpaces`); ``rng``: the
    learner reactor's generator (minibatch order); ``torch_seed``: int for the network's
    initialisation. Call :meth:`observe` once per tag; every ``cfg.num_steps`` tags it
    updates and returns new Weights. ConfigError for an invalid ``critic`` or a policy lag.
    """

    def __init__(
        self, cfg: MAPPOConfig, spaces: AgentSpaces, rng: np.random.Generator, torch_seed: int
    ) -> None:
        self.cfg, self.spaces = check_config(cfg), spaces
        net = build_network(spaces, cfg, torch_seed)
        width = spaces.obs_dim + spaces.n_agents + spaces.state_dim  # of a row
        box = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)
        self.ppo = PPOLearner(cfg, box, gym.spaces.Discrete(spaces.n_actions), rng, 0, net=net)
        self.buf: dict[str, np.ndarray] = {}
        self.t = 0
        self.env_steps = 0

    @property
    def updates(self) -> int:
        """The number of updates made so far."""
        return self.ppo.updates

    @property
    def stats(self) -> dict[str, float]:
        """The mean losses of the last update (pg_loss, v_loss, entropy, approx_kl, clipfrac)."""
        return self.ppo.stats

    @property
    def learning_rate(self) -> float:
        """The optimiser's step size now (annealed when ``anneal_lr``)."""
        return float(self.ppo.opt.lr)

    def weights(self) -> Weights:
        """The current network as :class:`rl_algos.networks.Weights` (numpy arrays)."""
        return export_weights(self.ppo.net, KIND, self.ppo.updates)

    def value(self, rows: np.ndarray) -> np.ndarray:
        """V of (B, row_dim) rows; (B,) float32."""
        return self.ppo.value(rows)

    def checkpoint(self) -> dict:
        """What ``model.pt`` holds: ``algo`` "mappo", ``kind``, ``spec`` and ``state_dict``
        (CPU tensors) of the network, the ``config`` (a dict), ``agents``, ``env_steps`` and
        ``updates``."""
        net = self.ppo.net
        return {
            "algo": "mappo",
            "kind": KIND,
            "spec": net.spec,
            "state_dict": {k: v.cpu() for k, v in net.state_dict().items()},
            "config": asdict(self.cfg),
            "agents": list(self.spaces.agents),
            "env_steps": self.env_steps,
            "updates": self.ppo.updates,
        }

    def observe(
        self,
        steps: Sequence[MultiAgentStep],
        record: ActRecord | None,
        stop: Callable[[], bool] = never,
    ) -> Weights | None:
        """Take one tag's data; returns new Weights after an update, else None.

        ``steps``: every environment group's MultiAgentStep at this tag (group order), the
        result of the actions in ``record``; ``record``: what the policy did on the previous
        rows (None at the first tag); ``stop``: as in :meth:`rl_algos.ppo.PPOLearner.update`.
        A truncated agent's reward gets gamma * V(its final row) (bootstrapped).
        """
        step = concat_agent_steps(steps)
        rows = agent_rows(step.obs, step.state)
        if not self.buf:
            self._allocate(rows)
        if record is not None:
            self._store(step, record)
        update = self.t == self.cfg.num_steps
        if update:
            self._update(rows, step.mask.reshape(-1), stop)
            self.t = 0
        self.buf["rows"][self.t] = rows
        self.buf["mask"][self.t] = step.mask.reshape(-1)
        return self.weights() if update else None

    def _allocate(self, rows: np.ndarray) -> None:
        t, r = self.cfg.num_steps, rows.shape[0]
        self.buf = {
            "rows": np.zeros((t, *rows.shape), np.float32),
            "mask": np.zeros((t, r), bool),
            "actions": np.zeros((t, r), np.int64),
            "logp": np.zeros((t, r), np.float32),
            "values": np.zeros((t, r), np.float32),
            "rewards": np.zeros((t, r), np.float32),
            "dones": np.zeros((t, r), bool),
        }

    def _store(self, step: MultiAgentStep, record: ActRecord) -> None:
        """Put the step the actions of ``record`` led to into the rollout's next slot."""
        b, t = self.buf, self.t
        acted = b["mask"][t]
        reward = step.reward.reshape(-1).astype(np.float32)
        cut = np.flatnonzero((step.truncated & ~step.terminated).reshape(-1) & acted)
        if len(cut) and step.final_obs is not None and step.final_state is not None:
            final = agent_rows(step.final_obs, step.final_state)
            reward[cut] += self.cfg.gamma * self.value(final[cut])
        # an absent slot's row is padding: no reward, and it cuts GAE's recursion
        b["rewards"][t] = np.where(acted, reward, 0.0)
        b["dones"][t] = step.done.reshape(-1) | ~acted
        b["actions"][t], b["logp"][t] = record.actions, record.logp
        b["values"][t] = np.where(acted, record.values, 0.0)
        self.t += 1
        self.env_steps += step.obs.shape[0]

    def _update(self, rows: np.ndarray, mask: np.ndarray, stop: Callable[[], bool]) -> None:
        """PPO's update on the live rows of the rollout, bootstrapped from ``rows`` (the
        rows after its last step; ``mask``: which are live)."""
        b, cfg = self.buf, self.cfg
        last = np.where(mask, self.value(rows), 0.0)
        adv, ret = compute_gae(
            b["rewards"], b["values"], b["dones"], last, cfg.gamma, cfg.gae_lambda
        )
        live = b["mask"].reshape(-1)
        batch = {k: b[k].reshape(live.size, *b[k].shape[2:])[live][:, None] for k in
                 ("rows", "actions", "logp")}  # fmt: skip
        batch["obs"] = batch.pop("rows")
        adv, ret = adv.reshape(-1)[live][:, None], ret.reshape(-1)[live][:, None]
        self.ppo.update_on(batch, adv, ret, stop, self.env_steps)
