"""What a boundary message costs in CPU on this host: the sender's and the receiver's, per
message and per byte, as the engine sends them (gloo isend / irecv of one flat float32 buffer).

    python benchmarks/bench_message_cpu.py --repeats 7

heterps_exec/calibration/gloo_cpu.py does the measuring (two processes over loopback, each
timing its own process CPU over rounds of --messages messages; `heterps-exec profile` runs
the same with its links, at 200 messages x 5 rounds). Printed per size: the median over
rounds on each side and the rounds' spread; then a least-squares line seconds = a + b x bytes
on each side, the numbers the simulator's `cores` effect charges
(traces/profiles/<host>-links.json, "message_cpu").

The sizes span exec-tiny's boundaries: a 32-sample microbatch at the cut after `concat`
carries 9,920 bytes each way (158,720 per 256-sample batch, half forward), after fc_0 8,256.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from heterps_exec.calibration.gloo_cpu import SIZES, profile_message_cpu  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=400, help="messages per round")
    p.add_argument("--repeats", type=int, default=7, help="rounds per size (median)")
    p.add_argument("--pace-s", type=float, default=0.001,
                   help="idle seconds before each send, one message in flight (0: back to back)")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes, comma-separated")
    args = p.parse_args()
    sizes = tuple(int(x) for x in args.sizes.split(","))
    got = profile_message_cpu(sizes, messages=args.messages, repeats=args.repeats,
                              pace_s=args.pace_s)
    print(f"gloo message CPU on {os.uname().nodename} ({os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f} after), {args.messages} messages x {args.repeats} rounds, "
          + (f"one every {1e3 * args.pace_s:g} ms" if args.pace_s > 0 else "back to back"))
    print(f"{'bytes':>8} {'send us/msg':>12} {'recv us/msg':>12} {'send spread':>12} "
          f"{'recv spread':>12}")
    for row in got["points"]:
        (s0, s1), (r0, r1) = row["send_spread_s"], row["recv_spread_s"]
        print(f"{row['bytes']:>8} {1e6 * row['send_s']:>12.1f} {1e6 * row['recv_s']:>12.1f} "
              f"{1e6 * s0:>5.0f}-{1e6 * s1:<6.0f} {1e6 * r0:>5.0f}-{1e6 * r1:<6.0f}")
    cpu = got["message_cpu"]
    for side in ("send", "recv"):
        print(f"{side}: {1e6 * cpu[side + '_s']:.1f} us per message + "
              f"{1e9 * cpu[side + '_s_per_byte']:.3f} ns per byte")
    print(json.dumps({"message_cpu": cpu}))


if __name__ == "__main__":
    main()
