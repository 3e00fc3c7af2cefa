"""The input commands: `catalog` (the resource types), `check` (validate scenarios), `problem`
(the numeric problem a scenario becomes)."""

from __future__ import annotations

import sys

from heterps_sim.cli.common import EXIT_BAD_INPUT, add_input, dump, load
from heterps_sim.core.files import UserFileError


def add_catalog(p) -> None:
    p.add_argument("--kind", choices=["cpu", "gpu"])


def cmd_catalog(args) -> int:
    from heterps_sim.inputs import catalog
    types = catalog.select(catalog.load_catalog(), kind=args.kind)
    if args.json:
        from dataclasses import asdict
        print(dump([asdict(t) for t in types]))
    else:
        import pandas as pd
        with pd.option_context("display.width", 200, "display.max_rows", 500):
            print(catalog.catalog_frame(types).to_string(index=False))
        print(f"\n{len(types)} resource types ({catalog.CATALOG_PATH})")
    return 0


def add_scenarios(p) -> None:
    pass


def cmd_scenarios(args) -> int:
    """The shipped scenarios: a name works wherever a scenario path does."""
    from heterps_sim.inputs.shipped import SHIPPED, scenarios
    found = scenarios()
    if args.json:
        print(dump([{"name": s.name, "path": str(s.path), "description": s.description}
                    for s in found]))
        return 0
    width = max(len(s.name) for s in found)
    for s in found:
        print(f"{s.name:<{width}}  {s.description}")
    print(f"\n{len(found)} scenarios ({SHIPPED / 'scenarios'}); use a name wherever a "
          "scenario path goes: heterps-sim simulate dlrm-criteo1tb-aws")
    return 0


def add_check(p) -> None:
    p.add_argument("scenarios", nargs="*")


def cmd_check(args) -> int:
    """Every file is checked; each bad one is one line on stderr, and the exit is 2."""
    from heterps_sim.schedulers.registry import SCHEDULERS
    rows, bad = [], 0
    for path in args.scenarios or [None]:
        try:
            loaded = load(path)
            scn = loaded.scenario
            if scn is not None and scn.schedule.scheduler not in SCHEDULERS:
                raise UserFileError(f"{path}: schedule.scheduler: unknown scheduler "
                                    f"{scn.schedule.scheduler!r}")
            if scn is not None and scn.schedule.options:
                check_scheduler_options(path, scn.schedule)
            p = loaded.problem
            rows.append({"input": str(path or "default"), "ok": True, "layers": p.num_layers,
                         "types": p.num_types, "throughput_limit": p.throughput_limit,
                         "runnable_entries": int(p.runnable.sum())})
        except UserFileError as exc:
            bad += 1
            rows.append({"input": str(path), "ok": False, "error": str(exc)})
    if args.json:
        print(dump(rows))
    else:
        for r in rows:
            if r["ok"]:
                print(f"ok    {r['input']}: {r['layers']} layers x {r['types']} types, limit "
                      f"{r['throughput_limit']:,.0f} samples/s")
            else:
                print(f"heterps-sim check: {' '.join(r['error'].split())}", file=sys.stderr)
    return EXIT_BAD_INPUT if bad else 0


def check_scheduler_options(path, schedule) -> None:
    """schedule.options against its scheduler's Config, as `schedule` will read them (an
    unknown or out-of-range option passed `check` and failed the first command to plan)."""
    from pydantic import ValidationError

    from heterps_sim.core.files import validation_message
    from heterps_sim.schedulers.registry import scheduler_class
    try:
        scheduler_class(schedule.scheduler).Config(**schedule.options)
    except ValidationError as exc:
        raise UserFileError(validation_message(f"{path}: schedule.options", exc)) from None


def add_problem(p) -> None:
    add_input(p)


def cmd_problem(args) -> int:
    p = load(args.input, args.model).problem
    if args.json:
        print(dump(p.to_json_dict()))
    else:
        print(f"{p.name}: {p.num_layers} layers x {p.num_types} types, batch {p.batch_size}, "
              f"limit {p.throughput_limit:,.6g} samples/s, {p.num_samples:,.6g} samples; "
              f"{int(p.runnable.sum())} of {p.runnable.size} (layer, type) entries runnable. "
              "Use --json for the numbers.")
    return 0


HANDLERS = {"catalog": (add_catalog, cmd_catalog), "scenarios": (add_scenarios, cmd_scenarios),
            "check": (add_check, cmd_check),
            "problem": (add_problem, cmd_problem)}
"""Command name -> (add its arguments to a parser, run it with the parsed args)."""
