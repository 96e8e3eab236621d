"""Jobs as the clients print and read them, shared by squeue, scontrol, scancel and sacct.

``fields`` (squeue's ``-o``/``-O`` fields), ``order`` (its ``-S`` sort),
``record`` (``scontrol show job``), ``steps`` (``squeue -s``, ``scontrol show
step``), ``ids`` (job ids as typed and printed) and ``statenames`` (state
names and codes; the state machine itself is ``controller/jobstate.py``).
Nothing is imported here, so a command pays only for the modules it uses.
"""
