"""`rl-paper`: HeterPS's LSTM policy trained with REINFORCE, one layer at a time."""
