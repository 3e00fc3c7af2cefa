"""The worked example from Python: plan the module, simulate the plan, train it with its
tables on a parameter-server shard (docs/guide/worked-example.md). Run from the repository
root after `python examples/make_criteo_sample.py runs/criteo-dcn.tsv --rows 30000 --seed 1`."""

from heterps_exec import RunRequest, run_plan
from heterps_sim.des import DesOptions, simulate
from heterps_sim.inputs.load import load_input
from heterps_sim.planner import Planner

SCENARIO = "examples/criteo_dcn/scenario.yaml"

problem = load_input(SCENARIO).problem  # the module captured, its layer chain, the roofline
answer = Planner().plan(problem)  # the plan `schedule` prints, priced as it runs
plan = answer.plan  # every stage's units and the microbatch count set
effects = DesOptions.with_effects("bubbles,allreduce,transfers,contention,ps")
simulated = simulate(problem, plan, seed=0, options=effects).result
for stage in plan.stages:
    print(f"{stage.layers[0]}..{stage.layers[-1]} on {stage.num_replicas} x {stage.resource}")
print(f"simulated {simulated.throughput:,.0f} samples/s at {simulated.cost_per_hour:.2f} USD/h")

request = RunRequest(plan=plan, scenario=SCENARIO, steps=60, ps_shards=1, optimizer="adagrad",
                     lr=0.05, binding="examples/criteo_dcn/binding.yaml",
                     out_dir="runs/criteo-dcn-py")
result = run_plan(request)  # the same request `heterps-exec run` builds from its flags
predicted = result["extra"]["predicted"]["simulator"]["throughput"]
held = result["extra"]["holdout"]
print(f"measured {result['throughput']:,.0f} samples/s (simulator predicted {predicted:,.0f} "
      f"for the real types); held-out AUC {held['auc']:.3f}, log-loss {held['log_loss']:.3f}")
