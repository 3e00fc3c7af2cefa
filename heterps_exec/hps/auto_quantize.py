"""`--quantize auto`: each link re-chooses its encodings every step, the same on both ends.

A link is one pair of neighbouring replicas (upstream u, downstream d) and carries three float
sections, each with its own encoding (partition.SECTIONS): the forward message's grad and plain
sections (u -> d) and the backward gradient (d -> u). Step n's encodings follow from the
traffic of step n-1 on that link: both ends see exactly the same bytes (the sender decodes what
it sent), take the same statistics (quantize.traffic_stats, in float64) and apply the same rule
(quantize.choose_mode), so the receiver sizes its buffers without a word from the sender.
Step 0 travels exactly; a link idle for a step keeps its encodings.
"""

from __future__ import annotations

import torch

from heterps_exec.hps import quantize
from heterps_exec.model.partition import SECTIONS, Boundary


class LinkModes:
    """One link's current encodings and the statistics of this step's traffic."""

    def __init__(self, bound: float) -> None:
        self.bound = bound
        self.modes: tuple[str, str, str] = ("none",) * len(SECTIONS)
        self._error = dict.fromkeys(SECTIONS, -1.0)
        """Largest int8 error estimate seen this step per section (-1: no traffic)."""
        self._peak = dict.fromkeys(SECTIONS, 0.0)

    def observe(self, section: str, x: torch.Tensor) -> None:
        error, peak = quantize.traffic_stats(x)
        self._error[section] = max(self._error[section], error)
        self._peak[section] = max(self._peak[section], peak)

    def end_step(self) -> None:
        """Choose next step's encodings (max is order-free: arrival order does not matter)."""
        self.modes = tuple(
            quantize.choose_mode(self._error[s], self._peak[s], self.bound, mode)
            if self._error[s] >= 0 else mode for s, mode in zip(SECTIONS, self.modes))
        self._error = dict.fromkeys(SECTIONS, -1.0)
        self._peak = dict.fromkeys(SECTIONS, 0.0)


class AutoLinks:
    """A replica's links to its upstream and downstream neighbours (by peer rank)."""

    def __init__(self, in_boundary: Boundary | None, out_boundary: Boundary | None,
                 bound: float) -> None:
        self.boundaries = {"in": in_boundary, "out": out_boundary}
        self.bound = bound
        self.links: dict[tuple[str, int], LinkModes] = {}

    def link(self, side: str, peer: int) -> LinkModes:
        key = (side, peer)
        if key not in self.links:
            self.links[key] = LinkModes(self.bound)
        return self.links[key]

    def boundary(self, side: str, peer: int) -> Boundary:
        """The cut on `side` ("in": upstream, "out": downstream) as this step encodes it."""
        return self.boundaries[side].with_modes(self.link(side, peer).modes)

    def observe_forward(self, side: str, peer: int, message: torch.Tensor) -> None:
        b = self.boundary(side, peer)
        for section, x in b.float_sections(message).items():
            self.link(side, peer).observe(section, x)

    def observe_backward(self, side: str, peer: int, grad: torch.Tensor) -> None:
        self.link(side, peer).observe("back", grad)

    def end_step(self) -> None:
        for link in self.links.values():
            link.end_step()

    def summary(self) -> dict[str, list[str]]:
        """Peer rank -> current (grad, plain, back) encodings, for the run's result."""
        return {f"{side}:{peer}": list(link.modes)
                for (side, peer), link in sorted(self.links.items())}
