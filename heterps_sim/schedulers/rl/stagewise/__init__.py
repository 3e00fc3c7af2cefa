"""`rl`: a stage-wise policy learned by imitation then REINFORCE, decoded and polished."""
