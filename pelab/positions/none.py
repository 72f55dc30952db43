"""No position information at all (NoPE; Haviv et al. 2022, Kazemnejad et al. 2023).

An encoder without it is exactly permutation-equivariant; a causal decoder can
still infer position from the mask. Use it with ``combine = none``.
"""

from __future__ import annotations

from pelab.positions import register
from pelab.positions.base import PositionScheme


@register
class NoPosition(PositionScheme):
    name = "none"
    description = "no position signal anywhere (NoPE); a causal mask may still leak position"
    position_free = True
