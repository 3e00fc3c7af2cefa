"""What a boundary message costs in CPU on this host: the sender's and the receiver's, per
message and per byte, as the engine sends them (gloo isend / irecv of one flat float32 buffer).

    python benchmarks/bench_message_cpu.py --repeats 7

Two processes (gloo over loopback). For each size, each round: a barrier (not timed), then
rank 0 isends --messages buffers to rank 1 (distinct tags, then waits for every send) while
rank 1 has posted the matching irecvs (allocating each buffer, as runtime/stage.py does) and
waits for them. Each rank times its own process CPU (time.process_time: every thread, gloo's
included) over the round; CPU per message = that / --messages. A rank blocked in wait() uses
no CPU (gloo's transport thread sleeps in epoll), so the figure is the work of moving the
messages, Python calls included. Printed per size: the median over rounds on each side;
then a least-squares line seconds = a + b x bytes on each side, the numbers the simulator's
`cores` effect charges (traces/profiles/<host>-links.json, "message_cpu").

The sizes span exec-tiny's boundaries: a 32-sample microbatch at the cut after `concat`
carries 9,920 bytes each way (158,720 per 256-sample batch, half forward), after fc_0 8,256.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = (256, 4096, 9920, 32768, 131072, 524288)


def _worker(rank: int, init: str, sizes: tuple[int, ...], messages: int, repeats: int,
            pace_s: float, out: str) -> None:
    torch.set_num_threads(1)  # as the engine's ranks on a shared host
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    results = {}
    idle = 0.0
    if pace_s > 0:  # the sender's sleeps alone: their CPU is taken out
        t0 = time.process_time()
        for _ in range(messages):
            time.sleep(pace_s)
        idle = (time.process_time() - t0) / messages
    for size in sizes:
        n = size // 4
        src = torch.randn(n)
        per_round = []
        for r in range(repeats + 1):  # the first round warms gloo's pairs up: dropped
            dist.barrier()
            t0 = time.process_time()
            if rank == 0:
                if pace_s > 0:  # one at a time, each after an idle gap (the rank computes)
                    for i in range(messages):
                        time.sleep(pace_s)
                        dist.isend(src, dst=1, tag=i).wait()
                else:
                    works = [dist.isend(src, dst=1, tag=i) for i in range(messages)]
                    for w in works:
                        w.wait()
            else:
                works = [dist.irecv(torch.empty(n), src=0, tag=i) for i in range(messages)]
                for w in works:
                    w.wait()
            cpu = time.process_time() - t0
            if r:
                per_round.append(cpu / messages - (idle if rank == 0 else 0.0))
        results[size] = per_round
    if rank in (0, 1):
        with open(f"{out}.{rank}", "w") as fh:
            json.dump(results, fh)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=400, help="messages per round")
    p.add_argument("--repeats", type=int, default=7, help="rounds per size (median)")
    p.add_argument("--pace-s", type=float, default=0.001,
                   help="idle seconds before each send, one message in flight (0: a stream)")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes, comma-separated")
    args = p.parse_args()
    sizes = tuple(int(x) for x in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cpu")
        mp.spawn(_worker, args=(f"file://{tmp}/store", sizes, args.messages, args.repeats,
                                   args.pace_s, out),
                 nprocs=2, join=True)
        sides = {}
        for rank, side in ((0, "send"), (1, "recv")):
            with open(f"{out}.{rank}") as fh:
                sides[side] = {int(k): v for k, v in json.load(fh).items()}
    print(f"gloo message CPU on {os.uname().nodename} ({os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f} after), {args.messages} messages x {args.repeats} rounds, "
          + (f"one every {1e3 * args.pace_s:g} ms" if args.pace_s > 0 else "streamed"))
    print(f"{'bytes':>8} {'send us/msg':>12} {'recv us/msg':>12} {'send spread':>12} "
          f"{'recv spread':>12}")
    med = {side: {s: statistics.median(v) for s, v in d.items()} for side, d in sides.items()}
    for s in sizes:
        spread = {side: (min(sides[side][s]), max(sides[side][s])) for side in sides}
        print(f"{s:>8} {1e6 * med['send'][s]:>12.1f} {1e6 * med['recv'][s]:>12.1f} "
              f"{1e6 * spread['send'][0]:>5.0f}-{1e6 * spread['send'][1]:<6.0f} "
              f"{1e6 * spread['recv'][0]:>5.0f}-{1e6 * spread['recv'][1]:<6.0f}")
    fit = {}
    for side in ("send", "recv"):
        b, a = np.polyfit(np.array(sizes, float), np.array([med[side][s] for s in sizes]), 1)
        fit[side] = (float(a), float(b))
        print(f"{side}: {1e6 * a:.1f} us per message + {1e9 * b:.3f} ns per byte")
    print(json.dumps({"message_cpu": {"send_s": fit["send"][0],
                                      "send_s_per_byte": fit["send"][1],
                                      "recv_s": fit["recv"][0],
                                      "recv_s_per_byte": fit["recv"][1]}}))


if __name__ == "__main__":
    main()
