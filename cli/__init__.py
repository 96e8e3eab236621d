"""Slurm-compatible client commands. They own nothing: each parses options as
Slurm does, calls the controller through ``corral.client`` and prints what
Slurm prints. ``boundary`` is the one place errors become ``prog: error: ...``.
"""
