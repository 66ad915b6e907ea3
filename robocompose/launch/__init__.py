"""Who runs episodes: this process, or Ray tasks on this machine or a cluster; the sweep, the
search and `eval` share it (`launcher=local|ray`, configs/launcher/).

Where things are: `config.py` (`LauncherConfig`, light: the verbs' configs hold it),
`launchers.py` (tasks, run here or on Ray, the parent checkpoints shipped to the nodes),
`episodes.py` (`evaluate_runs`: policies evaluated into their episode files through a launcher,
the files written by this process alone).
"""
