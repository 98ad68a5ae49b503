"""The core of the runtime: reactor-level objects, logical time and one worker running tags.

Owns: time (``tag``, ``units``, ``clock``), the reactor-level objects (``port``, ``action``,
``timer``, ``reaction``, ``reactor``: the base of generated classes, ``mode``), the future
events (``event_queue``), the rules of logical time (``engine``: the tag engine every
scheduler holds), the one-worker ``scheduler``, what one worker runs (``assembly``), the
process-wide ``context`` that reaction code reaches, and what every layer uses to speak and to
end: the runtime's messages (``log``), errors and how a failure is reported in ``.lf`` terms
(``errors``), a standard output that fails (``stdout_failure``) and a process's end without
the interpreter's tear-down (``process_end``). The per-tag modules among them are compiled by
mypyc (``reactors.native.MODULES``).

May import: ``reactors.native``. Nothing of the program model, the records, the parallel
runtime, the cluster or the launcher: those layers pass in what the core needs (an
``Assembly`` built for it, hooks such as ``Scheduler.checkpoint``).
"""
