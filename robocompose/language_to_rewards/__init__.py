"""Language to Rewards (Yu et al. 2023): the LLM fills a reward, a sampling MPC optimises it."""
