"""Running a program on several workers (processes or threads) of one machine, bit-identically
to one worker.

Owns: the plan of a run (``topology``: which channels cross workers and when; ``placement``:
which worker runs which reactor; ``plan``: both for one worker count; ``costs``: measured
reaction costs and the worker count they choose, ``-w 0``), the supervisor (``supervisor``),
a worker's life from build to exit (``worker_main``), what it gets from its transport
(``worker_connections``), its per-tag loop (``worker_scheduler``), the tag agreement run by
worker 0 (``coordinator``) and the tags a worker skips while idle (``skipped_tags``), the
transports (``transport``: the protocol; ``processes`` and ``threads``), shared memory
(``shm``: the channels; ``shm_owner``: whose segments they are, and reclaiming those of dead
runs), the control block and its waits and bells (``sync``), the channels' value codec
(``codec``), what workers print (``worker_stdout``) and the merging of the workers' records
(``worker_records``).

May import: ``reactors.records``, ``reactors.model``, ``reactors.core``, ``reactors.native``.
"""
