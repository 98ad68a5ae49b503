"""RL building blocks used by the reactors of lf_src/lib/ (DESIGN.md, "RL on reactors").

One concept per module: ``envs`` (gymnasium environments, K per reactor, Atari through
ale-py), ``seeding`` (per-reactor generators from the program seed and the instance name),
``device`` (cuda or cpu, deterministic torch, one transfer per batch), ``networks`` (MLP,
Nature CNN, weights as numpy arrays), ``replay`` (preallocated replay buffer), ``gae``,
``ppo`` and ``dqn`` (one algorithm per file), ``runlog`` (the run directory's files),
``modelfile`` (one model file per learner), ``salvage`` (files still written when a run is
stopped) and ``progress`` (the live progress line).
"""
