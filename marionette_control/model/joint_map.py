"""The hardware's joints and the model's configurations: the one mapping between them.

A model file's ``hardware.joint_names`` (``docs/models.md``) names the joint of the driver's
``/joint_states`` and command topics for each configuration; without it every configuration is its own
hardware joint. The controller reads joint states and writes commands through it, the simulator publishes and
takes them through it, and the optimizer names the drives of a request with it.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np


class JointMapError(ValueError):
    """A mapping or a list of hardware joints that does not fit the model; the message says what is wrong."""


class JointMap:
    """hardware joint name ↔ configuration of a model.

    Parameters
    ----------
    config_names : the model's configuration names, in model order (dynamic, then kinematic)
    nd : number of dynamic configurations (the first ``nd`` names)
    hardware_joints : {hardware name: configuration name}, every configuration once (None or empty: identity)

    Attributes
    ----------
    hardware_names : list (nq,) the hardware name of each configuration, in model order
    index : {hardware name: configuration index}
    """

    def __init__(self, config_names: Sequence[str], nd: int, hardware_joints: Optional[Mapping[str, str]] = None):
        self.config_names = list(config_names)
        self.nd = int(nd)
        mapping = dict(hardware_joints) if hardware_joints else {n: n for n in self.config_names}
        unknown = sorted(set(mapping.values()) - set(self.config_names))
        if unknown:
            raise JointMapError(f"joint-name mapping targets unknown configurations: {', '.join(unknown)}")
        missing = sorted(set(self.config_names) - set(mapping.values()))
        if missing:
            raise JointMapError(f"no hardware joint is mapped to configuration(s): {', '.join(missing)}")
        if len(set(mapping.values())) != len(mapping):
            raise JointMapError("two hardware joints map to the same configuration")
        to_hw = {c: h for h, c in mapping.items()}
        self.hardware_names = [to_hw[c] for c in self.config_names]
        self.index = {h: i for i, h in enumerate(self.hardware_names)}

    @classmethod
    def of(cls, model, hardware_joints: Optional[Mapping[str, str]] = None) -> "JointMap":
        """The map of a core model with ``hardware_joints`` (a model description's, or None: identity)."""
        return cls(model.config_names, model.nd, hardware_joints)

    @property
    def kinematic_hardware_names(self) -> list[str]:
        """The hardware names of the kinematic configurations (the drives), in model order."""
        return self.hardware_names[self.nd:]

    def hardware_name(self, config: str) -> str:
        """The hardware name of configuration ``config``."""
        return self.hardware_names[self.config_names.index(config)]

    def command_order(self, command_joints: Sequence[str]) -> np.ndarray:
        """Indices into the kinematic configurations (nk,) in the order of ``command_joints``, the hardware names
        of a position command's entries: each drive exactly once. Raises JointMapError naming the drives."""
        kin = self.kinematic_hardware_names
        if sorted(command_joints) != sorted(kin):
            raise JointMapError(f"must list each kinematic joint once ({', '.join(sorted(kin))}), "
                                f"got {list(command_joints)}")
        return np.array([kin.index(h) for h in command_joints], dtype=int)
