"""The program model: the elaborated program as frozen data, and building its runtime objects.

Owns: ``program`` (the :class:`~reactors.model.program.Program` and its parts, read from and
written as ``graph.json``; docs/PROGRAM.md documents every field), ``references`` (what a
reaction's triggers, sources, effects and arguments name), ``json_form`` (the strict JSON
encoder and decoder of frozen dataclasses), ``target`` (the target properties a program runs
with, and their defaults), ``arguments`` (main-reactor parameter values from a command line or
``lfc -D``), ``forwarding`` (those of the reactors inside it: ``--learner.device cpu``) and
``build`` (the model and a generated module in, the core objects of one worker out). The compiler writes the model; the runtime, the viewer and the tests read it.

May import: ``reactors.core``, ``reactors.native``.
"""
