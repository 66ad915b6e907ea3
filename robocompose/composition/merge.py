"""Parameter-space merge (model soup / PSEC-style): theta = sum_i w_i theta_i.

The baseline that distribution-level composition should beat. Only parents of one architecture
and one normalisation merge: the same PolicyConfig and the same normalisers.
"""

from __future__ import annotations

from collections.abc import Sequence

from robocompose.policies.base import GenerativePolicy, build_policy


def merge_parameters(
    parents: Sequence[GenerativePolicy], weights: Sequence[float]
) -> GenerativePolicy:
    if len(parents) != len(weights) or len(parents) < 2:
        raise ValueError(
            f"need >= 2 parents and one weight each. Got {len(parents)} parents, "
            f"{len(weights)} weights."
        )
    first = parents[0]
    for i, parent in enumerate(parents[1:], start=1):
        if (parent.device, parent.dtype) != (first.device, first.dtype):
            raise ValueError(
                f"parameter merge needs parents on one device in one dtype: parent 0 is on "
                f"{first.device} in {first.dtype}, parent {i} on {parent.device} in "
                f"{parent.dtype}."
            )
        diff = first.config.mismatches(parent.config)
        if diff:
            raise ValueError(
                f"parameter merge needs one architecture; parent {i} differs: " + "; ".join(diff)
            )
        for key, norm in first.normalizers.items():
            if key not in parent.normalizers or not norm.allclose(parent.normalizers[key]):
                raise ValueError(
                    f"parameter merge needs equal normalisers; parent {i} differs in {key!r}."
                )
    states = [p.state_dict() for p in parents]
    merged = {
        k: sum(w * s[k] for w, s in zip(weights, states, strict=True))
        if v.is_floating_point()
        else v.clone()
        for k, v in states[0].items()
    }
    policy = build_policy(first.config, first.normalizers).to(first.device, first.dtype)
    policy.load_state_dict(merged)
    policy.metadata = {**getattr(first, "metadata", {}), "merged_weights": list(weights)}
    return policy.eval()
