"""The private ROS graphs of the main job, the benchmarks and the tests (marionette_control/cli/ros_isolation.py)."""

import os
import subprocess
import sys

from marionette_control.cli.main_job.job import ros_graph
from marionette_control.cli.ros_isolation import claim_domain_id, in_graph, isolated_env


def test_a_claimed_domain_is_held_against_this_and_other_processes():
    a, b = claim_domain_id(1, 100), claim_domain_id(1, 100)
    assert a != b and 1 <= a <= 100 and 1 <= b <= 100
    # another process never gets an id this one holds (the locks outlive the call, not the process)
    code = "from marionette_control.cli.ros_isolation import claim_domain_id as c; print(c(1, 100))"
    other = int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert other not in (a, b)


def test_isolated_env_is_localhost_on_the_domain_without_static_peers():
    env = isolated_env(7, {"ROS_STATIC_PEERS": "10.0.0.2", "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "X": "1"})
    assert env["ROS_DOMAIN_ID"] == "7" and env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert "ROS_STATIC_PEERS" not in env and env["X"] == "1" and env["PYTHONUNBUFFERED"] == "1"


def test_in_graph_restores_the_variables(monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", "3")
    monkeypatch.delenv("ROS_AUTOMATIC_DISCOVERY_RANGE", raising=False)
    with in_graph(isolated_env(9)):
        assert os.environ["ROS_DOMAIN_ID"] == "9" and os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert os.environ["ROS_DOMAIN_ID"] == "3" and "ROS_AUTOMATIC_DISCOVERY_RANGE" not in os.environ


def test_the_main_job_runs_on_a_private_domain_unless_the_user_chose_one():
    private = ros_graph({"PATH": "/bin"})
    assert private["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert private["ROS_DOMAIN_ID"] not in ("", "0") and int(private["ROS_DOMAIN_ID"]) != int(
        ros_graph({})["ROS_DOMAIN_ID"])                   # each job its own graph
    # a domain the user set is theirs to share (e.g. to watch from rviz); their discovery range too
    chosen = ros_graph({"ROS_DOMAIN_ID": "0", "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"})
    assert chosen["ROS_DOMAIN_ID"] == "0" and chosen["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET"
    assert ros_graph({"ROS_DOMAIN_ID": "42"})["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    # a private domain keeps the discovery range the user asked for
    assert ros_graph({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"})["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "OFF"
