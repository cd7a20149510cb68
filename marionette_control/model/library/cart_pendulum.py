"""The pendulum on a cart (thesis §6.7.1): a pendulum actuated only by moving its cart horizontally.

The cart slides along y (configuration ``cart``), the pendulum rotates about x (``theta``,
0 = hanging down, pi = inverted) and carries a point mass at distance l. By default the cart
position is a kinematic configuration (prescribed: the input is the next cart position, thesis
§3.6/§4.7), so there is no torque on the pendulum: when the pendulum is horizontal,
accelerating the cart applies no torque to it, the singularity that §6.7.1 crosses with a
dynamic embedding (§6.6.1). ``pendulum_torque=True`` adds that embedding's fictitious torque
input ``theta_torque``; ``kinematic_cart=False`` makes the cart a dynamic body of mass
``cart_mass`` pushed by the force input ``cart_force``.

Default discrete layout: x = [theta, cart; p_theta; v_cart] (4 states, as the thesis's 4x4
state weight), u = [cart_{k+1}] (1 input).
"""

from __future__ import annotations

from marionette_control.model import SystemBuilder

DESCRIPTION = (
    "Thesis §6.7.1's pendulum on a cart: a point-mass pendulum (theta about x, 0 = hanging, pi = inverted) on a "
    "cart moving along y; the cart position is kinematic (the input), so no torque acts on the pendulum "
    "(singular when horizontal); optional fictitious torque for dynamic embedding. 4 states, 1 input."
)


def cart_pendulum(mass: float = 1.0, length: float = 1.0, gravity: float = 9.8, damping: float = 0.0,
                  kinematic_cart: bool = True, cart_mass: float = 1.0, pendulum_torque: bool = False):
    """Builds the pendulum on a cart (parameters in SI units; see the module docstring)."""
    b = SystemBuilder("cart_pendulum", gravity=(0.0, 0.0, -gravity), forcing="thesis")
    if kinematic_cart:
        b.frame("cart", "world", "ty", config="cart", kinematic=True)
    else:
        b.frame("cart", "world", "ty", config="cart", mass=cart_mass)
        b.config_force("cart", input="cart_force")
    b.frame("pendulum", "cart", "rx", config="theta")
    b.frame("bob", "pendulum", "tz", value=-length, mass=mass)
    if pendulum_torque:
        b.config_force("theta", input="theta_torque")
    if damping:
        b.damping("theta", damping)
    return b.build()
