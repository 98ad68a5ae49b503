"""Bounds on the size of a program, checked before anything of that size is read or built.

LF sets no such bounds; lfc rejects a program beyond them with an error located at the
declaration that crosses one (elaboration stops there), so that a mistyped width cannot
exhaust memory or time.
"""

from __future__ import annotations

#: Largest width of one bank (``new[N]``) or one multiport (``input[N]``), after parameters
#: and ``-D`` values are substituted.
MAX_WIDTH = 65_536
#: Largest number of reactor instances in a program (bank members counted one by one,
#: synthetic delay instances included).
MAX_INSTANCES = 262_144
#: Largest number of port channels in a program (a plain port has one, a multiport its width).
MAX_CHANNELS = 1_048_576
#: Deepest reactor containment: the main reactor is at depth 1, its children at depth 2, ...
MAX_DEPTH = 200
#: Largest ``.lf`` file read, in bytes (8 MiB; a 3.5 MB file of 24,000 reactor classes
#: compiles in about 12 s, so this bounds one file's parse to about half a minute).
MAX_SOURCE_BYTES = 8 * 1024 * 1024
