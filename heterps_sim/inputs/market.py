"""A market file: how a plan's units are rented when some of them are spot units.

    # market.yaml
    spot:                                 # the types rented on spot (the rest on demand)
      h100-80gb-sxm: {reclaims_per_hour: 2.0e-5}    # price: the catalog's spot price
      l4: {price_per_hour: 0.45, reclaims_per_hour: 7.0e-5}
    zone_outages_per_hour: 0.0            # all spot units reclaimed at once (one zone)
    notice_s: 120                         # warning before a reclaim (AWS: two minutes)
    restart_s: 300                        # a replacement ready (default: its type's startup_s)
    checkpoint:
      write_s: 45                         # writing one checkpoint (the job pauses)
      every_s: 1800                       # default: Young's interval sqrt(2 write_s / rate)
    probability: 0.9                      # the throughput floor must hold this often

Prices are USD per hour per unit (one GPU, or one VM), as the catalog's; rates are per unit-hour
held. A market says how units are rented, not what a plan is: `heterps-sim episodes` prices
any plan under one (planner/episodes.py). Bad input is one line naming the file and field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from heterps_sim.core.files import UserFileError, read_mapping, validation_message


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpotTerms(_Strict):
    price_per_hour: float | None = Field(
        default=None, gt=0, allow_inf_nan=False,
        description="USD per hour per unit on spot (default: the catalog's spot price).")
    reclaims_per_hour: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="Reclaims per unit-hour held (required unless `trace` is given).")
    trace: str | None = Field(default=None, description="An availability trace to replay "
                              "instead (seconds,units or milliseconds,add|remove,name CSV; "
                              "path relative to the market file).")
    trace_period_s: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                         description="The trace's window (default: its last "
                                                     "row's time).")
    trace_window_s: tuple[float, float] | None = Field(
        default=None, description="Replay only this part of the trace, [from_s, to_s] into "
        "its window (e.g. a part held out from the one a rate was fitted on).")
    fit_window_s: tuple[float, float] | None = Field(
        default=None, description="The part of the trace [from_s, to_s] what the planner knows "
        "comes from: the rate-only prediction and the checkpoint interval are fitted on it "
        "(default: the replayed part). Replaying a later part then tests the prediction on "
        "data it was not fitted on.")


@dataclass(frozen=True, slots=True)
class SpotType:
    """One type's spot terms, resolved."""

    price_per_hour: float
    reclaims_per_hour: float
    price_source: str
    """Where the price comes from: the market file, or the catalog's snapshot (date, URL)."""
    availability: object = None
    """des.availability.Availability to replay instead of the rate (None: the rate)."""
    fit_on: object = None
    """The part of the trace rates are fitted on (None: `availability` itself)."""

    def known(self):
        """The availability what the planner knows is fitted on (None: a rate)."""
        return self.availability if self.fit_on is None else self.fit_on


class CheckpointTerms(_Strict):
    write_s: float = Field(ge=0, allow_inf_nan=False,
                           description="Seconds to write one checkpoint (training pauses).")
    every_s: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                  description="Seconds of training between checkpoints "
                                              "(default: Young's interval).")


class MarketFile(_Strict):
    spot: dict[str, SpotTerms] = Field(default_factory=dict)
    zone_outages_per_hour: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    notice_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    restart_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    checkpoint: CheckpointTerms
    probability: float = Field(default=0.9, gt=0, le=1, allow_inf_nan=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Market:
    """A market file, resolved (planner/episodes.py reads it)."""

    spot: dict[str, SpotType] = field(default_factory=dict)
    zone_outages_per_hour: float = 0.0
    notice_s: float = 0.0
    restart_s: float | None = None
    checkpoint_write_s: float = 0.0
    checkpoint_every_s: float | None = None
    probability: float = 0.9
    source: str = "<market>"
    restart_extra_s: float = 0.0
    """Added to every restart (a fitted model's mean wait for capacity, planner.episodes)."""

    def on_demand(self) -> Market:
        """The same terms with every unit on demand (the reference a spot plan is held to)."""
        return Market(zone_outages_per_hour=0.0, notice_s=self.notice_s,
                      restart_s=self.restart_s, checkpoint_write_s=self.checkpoint_write_s,
                      checkpoint_every_s=self.checkpoint_every_s,
                      probability=self.probability, source=self.source)

    @property
    def holds_out(self) -> bool:
        """Some type's trace is replayed on another part than the one the planner knows (its
        fit window): what the jobs replay is held out from what plans are chosen on."""
        return any(t.fit_on is not None for t in self.spot.values())

    def known(self) -> Market:
        """The market the planner knows: each trace with a fit window replayed on that window,
        so that choosing among plans by their jobs never sees the held-out part (itself when
        nothing is held out)."""
        if not self.holds_out:
            return self
        return replace(self, spot={
            name: t if t.fit_on is None else replace(t, availability=t.fit_on, fit_on=None)
            for name, t in self.spot.items()})

    def lowest_units(self, name: str) -> int | None:
        """The fewest units of spot type `name` its known trace ever held (None: no trace, so
        no recorded limit on how many can be held)."""
        terms = self.spot.get(name)
        if terms is None or terms.availability is None:
            return None
        return min(terms.known().units)

    def checkpoint_interval_s(self, reclaims_per_hour: float) -> float:
        """every_s, else Young's interval sqrt(2 C / rate) for a job reclaimed `rate` times an
        hour (inf without reclaims: no checkpoint is needed)."""
        if self.checkpoint_every_s is not None:
            return self.checkpoint_every_s
        if reclaims_per_hour <= 0.0:
            return math.inf
        return math.sqrt(2.0 * max(self.checkpoint_write_s, 1e-3) * 3600.0 / reclaims_per_hour)


def parse_market(data: dict, source: str, types: list[str] | None = None,
                 catalog: dict | None = None, base: Path | None = None) -> Market:
    """A market mapping -> Market; `types`: the scenario's type names, which every spot type
    must be among; `catalog`: spot prices by type name (inputs.catalog.spot_prices()) for the
    types the file gives no price; `base`: the folder a trace's relative path starts from."""
    try:
        m = MarketFile.model_validate(data)
    except ValidationError as exc:
        raise UserFileError(validation_message(source, exc)) from None
    if types is not None:
        unknown = sorted(set(m.spot) - set(types))
        if unknown:
            raise UserFileError(f"{source}: spot.{unknown[0]}: not a type of the scenario "
                                f"({', '.join(sorted(types)[:6])}{', ...' if len(types) > 6 else ''})")
    spot = {}
    for name, terms in m.spot.items():
        if terms.reclaims_per_hour is None and terms.trace is None:
            raise UserFileError(f"{source}: spot.{name}: give reclaims_per_hour or a trace")
        trace = fit_on = None
        if terms.trace is not None:
            from heterps_sim.des.availability import load_availability
            path = Path(terms.trace)
            if not path.is_absolute() and base is not None:
                path = base / path
            try:
                trace = load_availability(path, terms.trace_period_s)
            except ValueError as exc:
                raise UserFileError(f"{source}: spot.{name}.trace: {exc}") from None
            if terms.fit_window_s is not None:
                try:
                    fit_on = trace.window(*terms.fit_window_s)
                except ValueError as exc:
                    raise UserFileError(f"{source}: spot.{name}.fit_window_s: {exc}") from None
            if terms.trace_window_s is not None:
                try:
                    trace = trace.window(*terms.trace_window_s)
                except ValueError as exc:
                    raise UserFileError(f"{source}: spot.{name}.trace_window_s: {exc}") from None
        else:
            for key in ("trace_window_s", "fit_window_s"):
                if getattr(terms, key) is not None:
                    raise UserFileError(f"{source}: spot.{name}.{key}: needs a trace")
        rate = terms.reclaims_per_hour or 0.0
        if terms.price_per_hour is not None:
            spot[name] = SpotType(terms.price_per_hour, rate, source, trace, fit_on)
            continue
        known = (catalog or {}).get(name)
        if known is None:
            raise UserFileError(f"{source}: spot.{name}.price_per_hour: the catalog has no spot "
                                f"price for {name}; give one (USD per unit-hour)")
        spot[name] = SpotType(known.price_per_hour, rate,
                              f"catalog, read {known.date} from {known.source}", trace, fit_on)
    return Market(spot=spot, zone_outages_per_hour=m.zone_outages_per_hour,
                  notice_s=m.notice_s, restart_s=m.restart_s,
                  checkpoint_write_s=m.checkpoint.write_s, checkpoint_every_s=m.checkpoint.every_s,
                  probability=m.probability, source=source)


def load_market(path: str | Path, types: list[str] | None = None) -> Market:
    """A market file, spot prices it leaves out taken from the shipped catalog."""
    from heterps_sim.inputs.catalog import spot_prices
    path = Path(path)
    return parse_market(read_mapping(path), str(path), types, spot_prices(), path.parent)


__all__ = ["Market", "MarketFile", "SpotType", "load_market", "parse_market"]
