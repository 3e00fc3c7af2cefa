"""The reinforcement-learning scheduler (HeterPS's LSTM + REINFORCE) and its Gymnasium env.

    features.py   per-layer and per-(layer, type) features, masks, normalisation (numpy)
    reward.py     reward = -(cost / reference), a penalty when infeasible (numpy)
    env.py        the Gymnasium environment "heterps/Schedule-v0" (numpy + gymnasium)
    policy.py     the LSTM policy: types scored by a shared head, so any L and any M (torch)
    train.py      REINFORCE training, CleanRL style: Args, sampling, update, checkpoints, main
    scheduler.py  RLPaperScheduler ("rl-paper"): train or fine-tune, keep the best plan sampled

Importing this package imports neither torch nor gymnasium (the registry names the scheduler
by string; torch loads when it is used).
"""
