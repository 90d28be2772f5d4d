"""The published training runs that the scaling-law fitter is applied to.

Besiroglu et al. (2024) read 245 runs off Figure 4 of Hoffmann et al. (2022): the
parameters N, the training FLOPs C and the final loss of each. The tokens are not
in the figure; they follow from C = 6ND. ``data/PROVENANCE.md`` says where the file
comes from and how exact it is.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources

import torch

from .laws import FLOPS_PER_PARAMETER_TOKEN

POINTS_FILE = "chinchilla_points.csv"


@dataclass(frozen=True)
class ScalingPoints:
    """Training runs as float64 tensors of one length P.

    Args:
        n: parameters N, (P,).
        d: training tokens D, (P,).
        loss: final loss, nats per token, (P,).

    Raises:
        TypeError: a field is not a tensor.
        ValueError: lengths differ, a value is not finite and > 0, or P < 5 (the
            law has five parameters).
    """

    n: torch.Tensor
    d: torch.Tensor
    loss: torch.Tensor

    def __post_init__(self) -> None:
        for name in ("n", "d", "loss"):
            v = getattr(self, name)
            if not isinstance(v, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(v)}")
            if v.ndim != 1:
                raise ValueError(f"{name} must be 1-D, got shape {tuple(v.shape)}")
            if not bool(torch.all(torch.isfinite(v) & (v > 0))):
                raise ValueError(f"{name} must be finite and > 0 everywhere")
        if not len(self.n) == len(self.d) == len(self.loss):
            raise ValueError(
                f"n, d and loss must have one length, got {len(self.n)}, "
                f"{len(self.d)}, {len(self.loss)}"
            )
        if len(self.n) < 5:
            raise ValueError(
                f"need at least 5 points for 5 parameters, got {len(self.n)}"
            )

    @property
    def flops(self) -> torch.Tensor:
        """C = 6ND of each run, (P,)."""
        return FLOPS_PER_PARAMETER_TOKEN * self.n * self.d

    def __len__(self) -> int:
        return len(self.n)

    def subset(self, keep: torch.Tensor) -> ScalingPoints:
        """The runs where the boolean mask ``keep`` (P,) is true."""
        return ScalingPoints(self.n[keep], self.d[keep], self.loss[keep])

    @classmethod
    def from_flops(
        cls, n: torch.Tensor, flops: torch.Tensor, loss: torch.Tensor
    ) -> ScalingPoints:
        """Runs given by N and C, as the figure gives them: D = C / (6N)."""
        return cls(n, flops / (FLOPS_PER_PARAMETER_TOKEN * n), loss)


def chinchilla_points(device: torch.device | str = "cpu") -> ScalingPoints:
    """The 245 runs of Hoffmann et al.'s Figure 4, as Besiroglu et al. read them.

    Args:
        device: where the tensors go.
    """
    text = resources.files(__package__).joinpath("data", POINTS_FILE).read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    cols = {
        k: torch.tensor([float(r[k]) for r in rows], dtype=torch.float64, device=device)
        for k in ("params", "flops", "loss")
    }
    return ScalingPoints.from_flops(cols["params"], cols["flops"], cols["loss"])


def besiroglu_subset(points: ScalingPoints, dropped: int = 5) -> ScalingPoints:
    """All runs but the ``dropped`` of highest loss, as Besiroglu et al. fit them.

    Their notebook keeps the runs whose loss is below the ``dropped``-th largest.

    Raises:
        ValueError: ``dropped`` is negative or leaves fewer than 5 runs.
    """
    if not 0 <= dropped <= len(points) - 5:
        raise ValueError(f"dropped must be in [0, {len(points) - 5}], got {dropped!r}")
    if dropped == 0:
        return points
    threshold = torch.sort(points.loss).values[-dropped]
    return points.subset(points.loss < threshold)
