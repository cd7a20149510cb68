"""The whole-trajectory loops of the core allocate nothing per step.

Every batch entry point, with and without the constraint forces (Lam, Lam_x, Lam_u, the
covectors W of lambda), and the DEL residuals, Jacobians and Hessians of direct transcription, under both
forcing rules (thesis (4.12): the symmetric one's f+ terms too). A tiny malloc-counting shim (compiled here, loaded with LD_PRELOAD) counts
every malloc/calloc/realloc/posix_memalign of the process. Each batch entry
point is called with a short and a long horizon; the number of allocations
must not grow with the number of steps (the output arrays are allocated once
per call whatever N is).

numpy serves arrays under 1 KiB from its own cache without malloc: the short horizon (30
steps) keeps every float output above that size (Lam (30, 6) is 1.4 KiB), so both horizons
malloc the same outputs; the small int array of Newton iterations of ``simulate`` may or may
not hit that cache in a given call, so the growth is the median of three trials.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

SHIM = r"""
#include <stddef.h>
extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
static volatile unsigned long counter = 0;
unsigned long mc_alloc_count(void) { return counter; }
void* malloc(size_t n) { __sync_fetch_and_add(&counter, 1); return __libc_malloc(n); }
void* calloc(size_t a, size_t b) { __sync_fetch_and_add(&counter, 1); return __libc_calloc(a, b); }
void* realloc(void* p, size_t n) { __sync_fetch_and_add(&counter, 1); return __libc_realloc(p, n); }
int posix_memalign(void** p, size_t a, size_t n) {
  __sync_fetch_and_add(&counter, 1);
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;
}
"""

PROBE = textwrap.dedent("""
    import ctypes, json, sys
    import numpy as np
    from marionette_control import _core
    from marionette_control.model import library
    from marionette_control.model.library import humanoid_marionette as hm
    lib = ctypes.CDLL(sys.argv[1])
    lib.mc_alloc_count.restype = ctypes.c_ulong
    m = library.get("humanoid_marionette", forcing=sys.argv[2])
    q0 = hm.initial_configuration(m)
    ds = _core.DiscreteSystem(m, 0.01)
    x0 = ds.state_from_configs(q0, q0)
    U = hm.string_walk_inputs(m, q0, 0.01, 140)
    X, _ = ds.simulate(x0, U)
    A, B = ds.linearize_trajectory(X, U)
    K = np.zeros((140, m.nU, m.nx))
    Z = np.ones((140, m.nx))
    W = np.ones((140, m.nc))
    _, _, Lam = ds.simulate(x0, U, constraint_forces=True)
    p0, Q, Uf = x0[m.nq:m.nq + m.nd], X[:, :m.nq], U[:, :m.nu]
    Y = np.ones((140, m.nd + m.nc))
    P = np.ones((140, m.nd))
    calls = {
        "simulate": lambda n: ds.simulate(x0, U[:n]),
        "linearize_trajectory": lambda n: ds.linearize_trajectory(X[:n + 1], U[:n]),
        "second_order_trajectory": lambda n: ds.second_order_trajectory(X[:n + 1], U[:n], Z[:n]),
        "project": lambda n: ds.project(x0, X[:n + 1], U[:n], K[:n]),
        "simulate+constraint_forces": lambda n: ds.simulate(x0, U[:n], constraint_forces=True),
        "constraint_forces_trajectory": lambda n: ds.constraint_forces_trajectory(X[:n + 1], U[:n]),
        "linearize_trajectory+constraint_forces":
            lambda n: ds.linearize_trajectory(X[:n + 1], U[:n], constraint_forces=True),
        "second_order_trajectory+W": lambda n: ds.second_order_trajectory(X[:n + 1], U[:n], Z[:n], W[:n]),
        "project+constraint_forces": lambda n: ds.project(x0, X[:n + 1], U[:n], K[:n], constraint_forces=True),
        "del_residual": lambda n: ds.del_residual(p0, Q[:n + 1], Uf[:n], Lam[:n]),
        "del_residual+jacobian": lambda n: ds.del_residual(p0, Q[:n + 1], Uf[:n], Lam[:n], jacobian=True),
        "del_hessian": lambda n: ds.del_hessian(Q[:n + 1], Uf[:n], Lam[:n], Y[:n], P[:n]),
    }
    out = {}
    for name, f in calls.items():
        f(140)  # warm up: workspaces reach their final size
        growth = []
        for _ in range(3):
            a = lib.mc_alloc_count(); r = f(30); b = lib.mc_alloc_count(); del r
            c = lib.mc_alloc_count(); r = f(130); d = lib.mc_alloc_count(); del r
            growth.append((d - c) - (b - a))
        out[name] = sorted(growth)[1]
    print(json.dumps(out))
""")


def run_counted(tmp_path, probe_source: str, *args: str):
    """Runs ``probe_source`` (its argv[1]: the shim's path, then ``args``) with every malloc counted; the JSON value
    its last output line prints."""
    src = tmp_path / "count.c"
    src.write_text(SHIM)
    lib = tmp_path / "libcount.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    probe = tmp_path / "probe.py"
    probe.write_text(probe_source)
    env = dict(os.environ, LD_PRELOAD=str(lib), OPENBLAS_NUM_THREADS="1")
    res = subprocess.run([sys.executable, str(probe), str(lib), *args], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return __import__("json").loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None, reason="needs Linux and gcc")
@pytest.mark.parametrize("forcing", ["thesis", "symmetric"])
def test_batch_loops_allocate_nothing_per_step(tmp_path, forcing):
    growth = run_counted(tmp_path, PROBE, forcing)
    # 100 more steps may not cost a single extra allocation.
    assert growth == {name: 0 for name in growth}, growth
