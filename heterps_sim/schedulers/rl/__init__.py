"""The reinforcement-learning scheduler (HeterPS's LSTM + REINFORCE) and its Gymnasium env.

    features.py   per-layer and per-(layer, type) features, masks, normalisation (numpy)
    reward.py     reward = -(cost / reference), a penalty when infeasible (numpy)
    env.py        the Gymnasium environment "heterps/Schedule-v0" (numpy + gymnasium)
    policy.py     the LSTM policy: types scored by a shared head, so any L and any M (torch)
    train.py      REINFORCE training, CleanRL style: Args, sampling, update, checkpoints, main
    scheduler.py  RLPaperScheduler ("rl-paper"): train or fine-tune, keep the best plan sampled

The improved scheduler "rl" (a plan built stage by stage; imitation of exact optima + PPO):
    segments.py     candidate stages (start, length, type): features, masks, relaxed lookahead
    seg_tensors.py  one problem's candidates as compact tensors; the lookahead's regret
    seg_policy.py   the stage-level LSTM policy (torch)
    problems.py     random training problems with their exact optima
    train_rl.py     imitation then PPO, CleanRL style: Args, phases, checkpoints, main
    polish.py       best-improvement local search over plans, batched (and by the DES)
    level_moves.py  compound polish moves: re-cut stage groups at a higher bottleneck level
    window_moves.py compound polish moves: re-partition a window of consecutive stages
    des_reward.py   reward="des": plans judged by the simulator's throughput-constrained cost
    scheduler_rl.py RLScheduler ("rl"): checkpoint, fine-tune, sample, polish
    rl-pretrained.pt  the shipped checkpoint (README: how it was trained)

Importing this package imports neither torch nor gymnasium (the registry names the scheduler
by string; torch loads when it is used).
"""
