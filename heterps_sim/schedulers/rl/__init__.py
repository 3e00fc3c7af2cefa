"""The reinforcement-learning schedulers, HeterPS's and an improved one.

    reward.py     reward = -(cost / reference), a penalty when infeasible (numpy)
    paper/        `rl-paper`, HeterPS's scheduler: features (per-layer and per-(layer, type),
                  masks), env (the Gymnasium environment "heterps/Schedule-v0"), policy (the
                  LSTM; types scored by a shared head, so any L and any M), train (REINFORCE,
                  CleanRL style), scheduler (RLPaperScheduler: train or fine-tune, keep the best
                  plan sampled)
    stagewise/    `rl`, a plan built stage by stage: segments (candidate stages, relaxed
                  lookahead), tensors (one problem's candidates as tensors), policy (the
                  stage-level LSTM), imitation (random problems with their exact optima), train
                  (imitation then PPO), des_reward (plans judged by the simulator), scheduler
                  (RLScheduler: checkpoint, fine-tune, sample, polish with
                  heterps_sim.schedulers.search), rl-pretrained.pt (the shipped checkpoint)

Importing this package imports neither torch nor gymnasium (the registry names the schedulers
by string; torch loads when one is used).
"""
