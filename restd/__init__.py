"""corral-restd, the Slurm-compatible REST gateway: HTTP in, the same gRPC
Controller calls the CLI makes out. It owns no state.

The gateway itself arrives with its own issue; the package exists now so that
every Corral program has its final import path from the start.
"""
