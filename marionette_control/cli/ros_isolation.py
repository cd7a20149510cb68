"""A private ROS graph on this machine: a domain id no other process holds, localhost discovery.

One place for the rule the main job, the benchmarks and the tests follow when they start nodes of their own:
nodes of a simulated arm must never be discovered by (or discover) another graph on the machine — the robot's
own controller on the default domain would otherwise take the simulator's ``/joint_states`` as the arm's, and
two jobs on the same machine would answer each other's requests.

A domain id is claimed through ``ros-domain-coordinator`` (``domain_coordinator``: the allocator of ament's isolated
tests and launch_testing), which holds a domain by binding TCP port 32768 + id; the claim lasts until the claiming
process exits, so every process using this module — and every ament test on the machine — gets a domain of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import os

import domain_coordinator

#: The variables that select a graph (``ROS_STATIC_PEERS`` is dropped: it would add peers beyond localhost).
ISOLATION_VARIABLES = ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")

_claims = contextlib.ExitStack()   # the domains held (released when the process exits)


def claim_domain_id(first: int = 1, last: int = 100) -> int:
    """A ROS domain id in [first, last] that no process on this machine holds, this one included (each call
    claims another). Raises RuntimeError when all are taken."""
    span = last - first + 1
    order = itertools.count(os.getpid())   # processes start their search at different ids

    def selector() -> int:
        return first + next(order) % span

    try:
        return _claims.enter_context(domain_coordinator.domain_id(selector))
    except RuntimeError:
        raise RuntimeError(f"no free ROS domain id in {first}-{last} (all held by other processes on this "
                           "machine)") from None


def isolated_env(domain_id: int, base: dict | None = None) -> dict:
    """``base`` (default: this process's environment) on the private graph ``domain_id``, localhost only, for
    node processes (unbuffered output, so their logs are complete when they are stopped)."""
    env = dict(os.environ if base is None else base)
    env["ROS_DOMAIN_ID"] = str(int(domain_id))
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_STATIC_PEERS", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextlib.contextmanager
def in_graph(env: dict):
    """This process (for in-process rclpy) on the graph of ``env`` for the duration; restores the variables."""
    saved = {k: os.environ.get(k) for k in ISOLATION_VARIABLES}
    os.environ.update({k: env[k] for k in ISOLATION_VARIABLES})
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


__all__ = ["ISOLATION_VARIABLES", "claim_domain_id", "in_graph", "isolated_env"]
