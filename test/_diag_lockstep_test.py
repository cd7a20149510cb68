import numpy as np
import test_closed_loop as T
from ros_helpers import node_processes  # noqa
from test_closed_loop import wave  # noqa

CMDS = {}
orig = T.Probe._row
def _row(self, c, msg):
    CMDS.setdefault(c, {})[msg.tick] = (msg.header.stamp.sec * T.NS + msg.header.stamp.nanosec, list(msg.command), msg.compute_time)
    orig(self, c, msg)
T.Probe._row = _row

def test_diag(wave, node_processes):
    traj, files = wave
    for rep in range(4):
        CMDS.clear()
        truth = {}
        origt = T.Probe._true
        def _true(self, msg):
            stamp = msg.header.stamp.sec * T.NS + msg.header.stamp.nanosec
            truth[stamp] = np.asarray(msg.position)
            origt(self, msg)
        T.Probe._true = _true
        runs = T.run_scenario("delay", wave, node_processes)
        T.Probe._true = origt
        k, q, xh = runs["closed"]
        print("rep", rep, "closed", T.errors(traj, k, q))
        cm = CMDS["controller_closed"]
        stamps = sorted(truth)
        dt = 10_000_000
        print("ticks", sorted(cm)[:15], "truth stamps", stamps[:3], len(stamps))
        for kk in sorted(cm)[:12]:
            s, cmd, ct = cm[kk]
            # where does the true carriage first equal the command
            lag = None
            for l in range(0, 8):
                t = s + (1 + l) * dt
                if t in truth and abs(truth[t][2] - cmd[0]) < 1e-9:
                    lag = l; break
            print(kk, "stamp", s, "cmd", np.round(cmd, 5), "compute_us", round(ct * 1e6), "acts at +", lag)
        lags = []
        for kk in sorted(cm)[12:250]:
            s, cmd, ct = cm[kk]
            lag = None
            for l in range(0, 5):
                t = s + (1 + l) * dt
                if t in truth and abs(truth[t][2] - cmd[0]) < 1e-9:
                    lag = l; break
            lags.append(lag)
        print("lags 12..250", {l: lags.count(l) for l in set(lags)})
