"""Rewards into RL trainers: adapters for TRL, verl and OpenRLHF, and the pieces around the reward.

Each module is imported on its own (importing this package loads no trainer, no torch):
- `rewardlab.integrations.trl`: `reward_func`, `async_reward_func`, `reward_funcs` for TRL's `GRPOTrainer` /
  `RLOOTrainer` (`reward_funcs=`, `reward_weights`).
- `rewardlab.integrations.verl`: `compute_score`, a drop-in for verl's `default_compute_score` (naive, dapo,
  batch and prime reward managers; `custom_reward_function.path`).
- `rewardlab.integrations.openrlhf`: `reward_func(queries, prompts, labels, **kwargs)` for OpenRLHF's python-file
  remote reward (`--reward.remote_url path/to/file.py`).
- `rewardlab.integrations.payload`: the framework-free OpenRLHF payload (`{"query", "prompts", "labels"}` in,
  `{"rewards", "scores", "extra_logs"}` out), shared with the HTTP server's `/get_reward`.
- `rewardlab.integrations.advantages`: GRPO, Dr. GRPO, RLOO and REINFORCE++ advantages, DAPO overlong penalty.
- `rewardlab.integrations.kl`: KL estimators k1, k2, k3 (best-of-N's analytic KL: `rewardlab.select.curves`).
- `rewardlab.integrations.rwr`: reward-weighted regression weights for reward-weighted SFT.
- `rewardlab.integrations.dpo_pairs`: DPO preference pairs from scored candidates (`rewardlab pairs`).
- `rewardlab.integrations.scored`: reads `rewardlab score` output rows, grouped by prompt (for pairs and weights).

Wiring for each trainer: `docs/rl.md`; advantages and pairs: `docs/rl-tools.md`; the
reward-hacking monitor (`rewardlab monitor`) lives in `rewardlab.evaluate.monitor`.
"""
