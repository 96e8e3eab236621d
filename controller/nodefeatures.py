"""``scontrol update NodeName=.. Features=|AvailableFeatures=|ActiveFeatures=``.

A node's AvailableFeatures and ActiveFeatures start as slurm.conf's
``Features=``; an administrator may change them at run time. As in Slurm
without a node_features plugin, setting the available ones sets the active ones
too (unless both are given), and the active ones must be among the available
ones. The change is the node's runtime state (``NodeRuntime``, journaled), and
``applied`` writes the active ones into the configuration the store holds, so
that every reader of ``NodeConfig.features`` (``--constraint`` at submission,
placement, the snapshot, sinfo's ``%b``) sees them; it is applied again after a
``scontrol reconfigure``, as the changes outlive it and a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.model import NodeRuntime
from corral import errors
from corral.config import NodeConfig, SlurmConfig
from corral.errors import SlurmError

#: Characters of --constraint's grammar, which no feature name may hold.
_GRAMMAR = set("&|[]()*!,: \t")


def _words(text: str) -> list[str]:
    """``text`` as feature names (comma-separated; empty: none), each checked."""
    names = [word for word in text.split(",") if word] if text else []
    if any(set(name) & _GRAMMAR for name in names) or (text and not names):
        raise SlurmError(errors.ESLURM_INVALID_FEATURE)
    return list(dict.fromkeys(names))


def update(
    node: NodeRuntime, conf: NodeConfig, available: str | None, active: str | None
) -> NodeRuntime:
    """``node`` with the features an administrator set (None: not set)."""
    avail = _words(available) if available is not None else list(available_of(node, conf))
    if active is not None:
        act = _words(active)
    elif available is not None:
        act = avail
    else:
        act = list(active_of(node, conf))
    if not set(act) <= set(avail):
        raise SlurmError(errors.ESLURM_INVALID_FEATURE, "Active features not subset of available")
    return replace(node, available_features=",".join(avail), active_features=",".join(act))


def available_of(node: NodeRuntime, conf: NodeConfig) -> tuple[str, ...]:
    """The node's AvailableFeatures."""
    if node.available_features is None:
        return conf.features
    return tuple(word for word in node.available_features.split(",") if word)


def active_of(node: NodeRuntime, conf: NodeConfig) -> tuple[str, ...]:
    """The node's ActiveFeatures: what ``--constraint`` matches."""
    if node.active_features is None:
        return conf.features
    return tuple(word for word in node.active_features.split(",") if word)


def applied(conf: SlurmConfig, nodes: Mapping[str, NodeRuntime]) -> SlurmConfig:
    """``conf`` with each node's active features as its ``features`` (``conf`` itself
    when no node's were changed)."""
    changed = [
        replace(node, features=active_of(nodes[node.name], node))
        if node.name in nodes and nodes[node.name].active_features is not None
        else node
        for node in conf.nodes
    ]
    if all(new is old for new, old in zip(changed, conf.nodes, strict=True)):
        return conf
    return replace(conf, nodes=tuple(changed))
