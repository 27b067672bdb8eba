"""Post-hoc calibration and ensembles: functions of saved logits, no training.

Temperature scaling (Guo et al. 2017) fits one scalar T > 0 on validation
logits by minimising NLL. For multi-head models the paper's appendix first
averages the head *logits*, then divides by T.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .metrics import head_probs, softmax


def mean_head_logits(logits: np.ndarray) -> np.ndarray:
    """[N, M, K] -> [N, K]: average logits over heads (paper appendix, for TS)."""
    return np.asarray(logits, dtype=np.float64).mean(axis=1)


def fit_temperature(logits: np.ndarray, labels: np.ndarray, max_iter: int = 200) -> float:
    """T minimising NLL(softmax(z / T)) on [N, M, K] or [N, K] logits.

    Optimised over log T with L-BFGS (keeps T > 0). If the optimum is worse
    than T = 1 (non-convergence), T = 1 is returned, so validation NLL never
    goes up.
    """
    z = torch.as_tensor(mean_head_logits(logits) if np.ndim(logits) == 3 else logits,
                        dtype=torch.float64)
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=0.5, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(z / log_t.exp(), y)
        loss.backward()
        return loss

    opt.step(closure)
    t = float(log_t.detach().exp())
    with torch.no_grad():
        if not np.isfinite(t) or F.cross_entropy(z / t, y) > F.cross_entropy(z, y):
            return 1.0
    return t


def scaled_probs(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Probabilities after temperature scaling (head logits averaged first)."""
    z = mean_head_logits(logits) if np.ndim(logits) == 3 else np.asarray(logits, np.float64)
    return softmax(z / temperature, axis=-1)


def ensemble_probs(logits_list: list[np.ndarray]) -> np.ndarray:
    """Deep ensemble: mean over members of each member's prediction
    (itself the mean of its head softmaxes)."""
    return np.mean([head_probs(lg) for lg in logits_list], axis=0)
