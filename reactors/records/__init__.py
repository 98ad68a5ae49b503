"""What a run keeps of itself on disk: digests and traces, recordings and replays, snapshots.

Owns: ``trace`` (the digest of every port value at every tag, ``--digest``, and the timing
trace), ``port_checksums`` (the CRC-32 of port values that a recording keeps), ``replay``
(recording a run's inputs from outside logical time and replaying them, ``--record``,
``--replay``) and its file (``recording_file``), ``snapshot`` (what a snapshot holds of a
running program) and its file (``snapshot_file``), the runs a snapshot folder holds
(``snapshot_runs``), the one writer per run (``run_lock``), taking snapshots and resuming
(``checkpoint``, whose policy is ``checkpoint_policy``) and the user's key that
authenticates snapshots and recordings (``user_key``). Each works on one worker's share; the
parallel runtime merges the workers' parts.

May import: ``reactors.model``, ``reactors.core``, ``reactors.native``.
"""
