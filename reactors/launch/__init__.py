"""Starting a generated program: its command line, its run on one worker or several, its exit
status.

Owns: ``main`` (what a generated module's ``main`` runs: load graph.json, read the command
line, build, run on one worker or hand over to the backends, write the records, return the
exit status), ``options`` (the program's command line), ``usage`` (its ``--help``: the
options, and the parameters with their descriptions), ``backends`` (the
transports a run on several workers may use, ``--backend`` and ``--cluster``) and
``before_import`` (a run on worker processes supervised before the module's own imports
load).

May import: ``reactors.cluster``, ``reactors.parallel``, ``reactors.records``,
``reactors.model``, ``reactors.core``, ``reactors.native``.
"""
