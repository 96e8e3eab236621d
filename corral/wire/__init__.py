"""Wire types. ``corral_pb2``/``corral_pb2_grpc`` and ``schema`` are generated
from ``proto/`` at install time by ``proto/generate.py``; ``codec`` is the
protobuf-free encoder the CLI uses (see docs/wire.md).
"""
