"""Running the workers of a program on several machines: ``--cluster ray``.

Owns: the Ray transport (``ray_transport``: the supervisor's side, a placement group of one
actor per worker; ``ray_actor``: one worker as a Ray actor), the network copy of the control
block and channels between nodes (``net``), the frames sent over TCP and the receivers
(``wire``) and the proof a connection gives before anything it sends is read
(``handshake``). A worker's life, its tags and its channels are the parallel layer's; only
how workers start and reach each other differs.

May import: ``reactors.parallel``, ``reactors.records``, ``reactors.model``, ``reactors.core``,
``reactors.native``.
"""
