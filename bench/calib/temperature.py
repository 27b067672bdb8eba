"""Temperature scaling and deep ensembles: functions of saved logits, no training.

Temperature scaling (Guo et al. 2017) fits one scalar T > 0 on validation
logits by minimising NLL. For multi-head models the paper's appendix first
averages the head *logits*, then divides by T.
"""
from __future__ import annotations

import numpy as np

from bench.calib.metrics import head_probs, softmax


def mean_head_logits(logits: np.ndarray) -> np.ndarray:
    """[N, M, K] -> [N, K]: average logits over heads (paper appendix, for TS);
    [N, K] logits are returned as they are (float64)."""
    z = np.asarray(logits, dtype=np.float64)
    return z.mean(axis=1) if z.ndim == 3 else z


# log T is searched in [-10, 10] (T from 4.5e-5 to 22,026): the optimum can be
# at T -> 0 (separable validation set) or T -> inf (labels unrelated to logits).
LOG_T_BOUNDS = (-10.0, 10.0)


def softmax_nll(s: np.ndarray, labels: np.ndarray):
    """(mean -log softmax(s)_y, softmax(s) - onehot(y), s shifted by its row
    maxima): the NLL and the pieces of its gradient, for temperature scaling
    here and the calibrators of bench.calib.posthoc (each finishes the
    gradient in its own parameters; the row sums of the second are 0, so
    either s gives the same gradient, and the shifted one is what they use)."""
    s = s - s.max(axis=1, keepdims=True)
    logp = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
    rows = np.arange(len(labels))
    p_minus_y = np.exp(logp)
    p_minus_y[rows, labels] -= 1.0
    return -logp[rows, labels].mean(), p_minus_y, s


def _nll_and_grad(log_t: np.ndarray, z: np.ndarray, labels: np.ndarray):
    """NLL(softmax(z / T)) and its derivative in log T (d(z/T)/d log T = -z/T)."""
    nll, p_minus_y, s = softmax_nll(z / np.exp(log_t[0]), labels)
    grad = -np.sum(p_minus_y * s) / len(labels)  # shift-invariant: sum_k (p - y)_k = 0
    return nll, np.array([grad])


def one_blas_thread():
    """One BLAS thread while fitting a calibrator: its products are thin
    ([N, K+1] by [K+1, K], or scalars in L-BFGS-B's own updates), threads only
    add overhead (10-30x slower on a loaded 2-core machine: a temperature fit
    of 1,000 samples took 73 ms with threads, 7 ms without), and the result no
    longer depends on the machine's thread count."""
    # threadpoolctl on demand: `bench list` loads bench.calib and no calibrator fit
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def fit_temperature(logits: np.ndarray, labels: np.ndarray, max_iter: int = 200) -> float:
    """T minimising NLL(softmax(z / T)) on [N, M, K] or [N, K] logits.

    L-BFGS on log T (keeps T > 0) with the exact gradient, in float64 numpy
    (scipy's L-BFGS-B: torch.optim would import torch._dynamo, seconds per
    process). If the optimum is worse than T = 1 (non-convergence), T = 1 is
    returned, so validation NLL never goes up.
    """
    # scipy on demand: `bench list` and `import bench.api` load bench.calib, not scipy
    from scipy.optimize import minimize

    z = mean_head_logits(logits)
    y = np.asarray(labels, dtype=np.int64)
    with one_blas_thread():  # scipy's L-BFGS-B calls BLAS: 10x slower with threads
        res = minimize(_nll_and_grad, np.zeros(1), args=(z, y), jac=True, method="L-BFGS-B",
                       bounds=[LOG_T_BOUNDS], options={"maxiter": max_iter})
    t = float(np.exp(res.x[0]))
    if not np.isfinite(res.fun) or res.fun > _nll_and_grad(np.zeros(1), z, y)[0]:
        return 1.0
    return t


def scaled_probs(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Probabilities after temperature scaling (head logits averaged first)."""
    z = mean_head_logits(logits)
    return softmax(z / temperature, axis=-1)


def ensemble_probs(logits_list: list[np.ndarray]) -> np.ndarray:
    """Deep ensemble: mean over members of each member's prediction
    (itself the mean of its head softmaxes)."""
    return np.mean([head_probs(lg) for lg in logits_list], axis=0)
