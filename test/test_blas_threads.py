"""The optimizer's solves run numpy's and scipy's BLAS on one thread and give the numbers back afterwards
(``marionette_control/ocp/blas_threads.py``, issue 28): read through threadpoolctl, the library that sets
them, inside an optimization (its iteration callback) and after it, also when solves overlap in threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.ocp import blas_threads
from marionette_control.ocp.cost import tracking_cost
from marionette_control.ocp.projection import OptimizerOptions, ProjectionOptimizer

threadpoolctl = pytest.importorskip("threadpoolctl")


def blas_threads_now() -> list:
    """The number of threads of every BLAS library loaded in the process."""
    return [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]


def swing_up_optimizer():
    """A short pendulum swing-up (seed 001 §VIII-A's problem at N = 30)."""
    ds = _core.DiscreteSystem(library.get("pendulum"), 0.1)
    N = 30
    Xd = np.zeros((N + 1, 2))
    Xd[N // 2:, 0] = np.pi
    cost = tracking_cost(Xd, np.zeros((N, 1)), np.diag([1000.0, 1.0]), np.array([[50.0]]))
    return ProjectionOptimizer(ds, cost, OptimizerOptions(max_iterations=3)), np.zeros((N + 1, 2)), np.zeros((N, 1))


def test_a_solve_runs_blas_on_one_thread_and_restores_the_numbers():
    opt, X0, U0 = swing_up_optimizer()
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):   # more than one, whatever the environment says
        before = blas_threads_now()
        assert before and all(n == 2 for n in before)
        seen = []
        result = opt.optimize(X0, U0, callback=lambda record: seen.append(blas_threads_now()))
        assert result.iterations > 0 and seen
        assert all(n == 1 for numbers in seen for n in numbers)
        assert blas_threads_now() == before


def test_overlapping_solves_restore_the_numbers_when_the_last_ends():
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads_now()
        first_in, second_out = threading.Event(), threading.Event()
        inside = []

        def first():
            with blas_threads.single_threaded():
                first_in.set()
                second_out.wait(10)
                inside.append(blas_threads_now())   # the second solve, which ended first, did not restore yet

        t = threading.Thread(target=first)
        t.start()
        assert first_in.wait(10)
        with blas_threads.single_threaded():
            inside.append(blas_threads_now())
        second_out.set()
        t.join(10)
        assert inside and all(n == 1 for numbers in inside for n in numbers)
        assert blas_threads_now() == before
