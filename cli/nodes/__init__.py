"""Nodes and partitions as the clients print them, shared by sinfo and scontrol.

``groups`` (sinfo's rows), ``fields`` (its ``-o``/``-O`` fields), ``record``
(``scontrol show node`` and ``show partition``) and ``statenames`` (Slurm's
node state names and the filters sinfo's ``-t`` accepts).
Nothing is imported here, so a command pays only for the modules it uses.
"""
