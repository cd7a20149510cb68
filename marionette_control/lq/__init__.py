"""Linear-quadratic layer: the discrete Riccati recursions (thesis app. B) and the tracking gains designed with them.

* :mod:`.riccati` — time-varying LQR, LQ with cross and linear terms (thesis (B.4)), DARE;
* :mod:`.gains` — time-varying LQR gains along a trajectory for the tracking controller, with their design
  record.

Imports the mechanics layer and the shared modules only (``docs/architecture.md``, "Layers").
"""
