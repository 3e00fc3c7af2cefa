"""The contract both packages share: spec, problem, plan, result, pipeline order, lanes,
sharing, H-PS options, traces and the one bad-input error. numpy + pydantic only, never simpy or torch."""
