"""Post-hoc calibrators beyond temperature scaling: pure functions of saved logits.

Each calibrator is a pair of functions, fitted on the validation split only:

    params = fit(val_logits, val_labels)      # logits [N, K], labels [N] ints in 0..K-1
    probs = apply(test_logits, params)        # [N', K] float64, rows sum to 1

Logits are the +TS rows' input: [N, K], or [N, M, K] per-head logits, which
are averaged over heads first (temperature.mean_head_logits). `params` is a
frozen dataclass of read-only float64 arrays. `CALIBRATORS` maps each short
name (the `--variants` spelling) to a `Calibrator(fit, apply, title,
version)`; temperature scaling itself stays in temperature.py:

    vs         vector scaling: softmax(w * z + b), w, b in R^K (Guo et al. 2017)
    dirichlet  softmax(W log softmax(z) + b) with ODIR (Kull et al. 2019)
    hb         one-vs-rest histogram binning, equal-mass bins, renormalised
    iso        one-vs-rest isotonic regression (scikit-learn), renormalised
    ets        ensemble temperature scaling (Zhang et al. 2020)

Fits are deterministic: fixed (identity) starting points, L-BFGS-B, damped
Newton or SLSQP, cross-validation folds without random draws, one BLAS
thread. Bad input raises a one-line BenchError naming the value.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import numpy as np

from bench.calib.temperature import (fit_temperature, mean_head_logits, one_blas_thread,
                                     softmax_nll)
from bench.core.errors import BenchError
from bench.calib.metrics import softmax

# scipy's defaults (ftol 2.2e-9, gtol 1e-5) stop vector scaling up to 5e-4 from
# its optimum in probability (23 classes); these, ~1e-6, at O(N K) a step.
LBFGS_OPTIONS = {"maxiter": 1000, "ftol": 1e-13, "gtol": 1e-9}


# ------------------------------------------------------------- checks --
def _check_logits(logits, name: str, split: str, k: int | None = None) -> np.ndarray:
    z = np.asarray(logits)
    if z.ndim not in (2, 3) or z.shape[0] == 0 or z.shape[-1] < 2:
        raise BenchError(f"{name}: {split} logits must be [N, K] or [N, M, K] with N >= 1 "
                         f"and K >= 2, got shape {z.shape}")
    z = mean_head_logits(z)
    bad = np.argwhere(~np.isfinite(z))
    if len(bad):
        row, col = bad[0]
        raise BenchError(f"{name}: {split} logits hold {z[row, col]} at row {row}, class "
                         f"{col}; calibrators need finite logits")
    if k is not None and z.shape[1] != k:
        raise BenchError(f"{name}: {split} logits have {z.shape[1]} classes, the "
                         f"calibrator was fitted on {k}")
    return z


def _inputs(logits, labels, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Checked validation logits (head-averaged) and int64 labels."""
    z, y = _check_logits(logits, name, "validation"), np.asarray(labels)
    if y.ndim != 1 or len(y) != len(z):
        raise BenchError(f"{name}: validation labels must be [N] with N = {len(z)} "
                         f"(the logits' rows), got shape {y.shape}")
    if y.dtype.kind not in "iu":
        raise BenchError(f"{name}: labels must be integer class indices, got dtype {y.dtype}")
    k = z.shape[1]
    out = np.flatnonzero((y < 0) | (y >= k))
    if len(out):
        raise BenchError(f"{name}: label {y[out[0]]} at row {out[0]} is outside the "
                         f"{k} classes 0..{k - 1}")
    y = y.astype(np.int64)
    if np.all(y == y[0]):
        raise BenchError(f"{name}: validation labels hold only class {y[0]}; fitting a "
                         "calibrator needs at least two classes present")
    return z, y


def _frozen(*arrays) -> list[np.ndarray]:
    """float64 read-only copies: fitted parameters cannot change after the fit."""
    out = [np.array(a, dtype=np.float64) for a in arrays]
    for a in out:
        a.setflags(write=False)
    return out


def _prior(y: np.ndarray, k: int) -> np.ndarray:
    return _frozen(np.bincount(y, minlength=k) / len(y))[0]


# ------------------------------------------------------------- shared --
def _nll_grad(s: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean -log softmax(s)_y and its gradient in s, (softmax(s) - onehot(y)) / N."""
    nll, p_minus_y, _ = softmax_nll(s, y)
    return float(nll), p_minus_y / len(y)


def _renormalise(q: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Rows of one-vs-rest scores divided by their sum; a row that is all zero
    (every class's bin or step said 0) gets the validation class frequencies,
    the best guess when the calibrator says nothing."""
    total = q.sum(axis=1, keepdims=True)
    return np.where(total > 0, q / np.where(total > 0, total, 1.0), prior)


# ---------------------------------------------------- vector scaling --
@dataclasses.dataclass(frozen=True, eq=False)
class VectorParams:
    scale: np.ndarray  # [K] w
    bias: np.ndarray  # [K] b, zero-sum (softmax ignores a common shift)


def _vs_objective(theta: np.ndarray, z: np.ndarray, y: np.ndarray):
    k = z.shape[1]
    value, g = _nll_grad(z * theta[:k] + theta[k:], y)
    return value, np.concatenate([(g * z).sum(axis=0), g.sum(axis=0)])


def fit_vector(logits, labels) -> VectorParams:
    """w, b minimising NLL(softmax(w * z + b)) by L-BFGS-B from w = 1, b = 0 (the
    identity, kept if the optimum is not better). The gradient in b sums to
    zero, so b stays zero-sum: one answer among the equivalent shifts."""
    # scipy on demand: `bench list` and `import bench.api` load bench.calib, not scipy
    from scipy.optimize import minimize

    z, y = _inputs(logits, labels, "vs")
    k = z.shape[1]
    start = np.concatenate([np.ones(k), np.zeros(k)])
    with one_blas_thread():
        res = minimize(_vs_objective, start, args=(z, y), jac=True, method="L-BFGS-B",
                       options=LBFGS_OPTIONS)
    theta = res.x if res.fun <= _vs_objective(start, z, y)[0] else start  # NaN: start
    return VectorParams(*_frozen(theta[:k], theta[k:]))


def apply_vector(logits, params: VectorParams) -> np.ndarray:
    z = _check_logits(logits, "vs", "test", len(params.scale))
    return softmax(z * params.scale + params.bias)


# ------------------------------------------------ Dirichlet calibration --
DIRICHLET_GRID = (1e3, 1e2, 10.0, 1.0, 0.1, 1e-2, 1e-3)  # lambda = mu, chosen by CV
DIRICHLET_FOLDS = 5


@dataclasses.dataclass(frozen=True, eq=False)
class DirichletParams:
    weights: np.ndarray  # [K, K] W, applied to log-probabilities
    bias: np.ndarray  # [K] b
    reg: np.ndarray  # [] lambda = mu of the final fit


def _log_probs(z: np.ndarray) -> np.ndarray:
    """[N, K+1]: log softmax(z) (exact where softmax underflows), then a 1 for b."""
    s = z - z.max(axis=1, keepdims=True)
    return np.hstack([s - np.log(np.exp(s).sum(axis=1, keepdims=True)), np.ones((len(z), 1))])


def _identity(k: int) -> np.ndarray:
    return np.hstack([np.eye(k), np.zeros((k, 1))]).ravel()  # softmax(log p) = p


def _odir_penalty(k: int, reg: float) -> np.ndarray:
    """Curvature d of the penalty sum(d v^2) / 2 over v = [W | b].ravel():
    lambda/(K(K-1)) sum_{i!=j} W_ij^2 + mu/K sum_j b_j^2, lambda = mu = reg."""
    d = np.full((k, k + 1), 2 * reg / (k * (k - 1)))
    d[np.arange(k), np.arange(k)] = 0.0
    d[:, k] = 2 * reg / k
    return d.ravel()


def _odir_objective(v, x, y, d):
    """Mean NLL of softmax(x V^T) + the ODIR penalty, and its gradient."""
    k = x.shape[1] - 1
    value, g = _nll_grad(x @ v.reshape(k, k + 1).T, y)
    return value + 0.5 * (d * v * v).sum(), (g.T @ x).ravel() + d * v


def _odir_hessian(v, x, y, d):
    """(1/N) sum_n (diag p_n - p_n p_n^T) kron x_n x_n^T + diag(d)."""
    n, k = len(x), x.shape[1] - 1
    p = softmax(x @ v.reshape(k, k + 1).T)
    a = (p[:, :, None] * x[:, None, :]).reshape(n, -1)
    h = -(a.T @ a)
    for i in range(k):
        blk = slice(i * (k + 1), (i + 1) * (k + 1))
        h[blk, blk] += (x * p[:, i:i + 1]).T @ x
    h /= n
    h[np.diag_indices_from(h)] += d
    return h


def _newton(v, data, max_iter: int = 50) -> np.ndarray:
    """Damped Newton: the objective is strictly convex (reg > 0), a few steps
    reach the optimum to machine precision where L-BFGS needs hundreds (the
    penalty is all that curves some directions when reg is small)."""
    f, g = _odir_objective(v, *data)
    for _ in range(max_iter):
        step = np.linalg.solve(_odir_hessian(v, *data), g)
        dec = float(g @ step)  # Newton decrement squared: 2x the predicted gain
        if not dec > 1e-14:
            break
        t = 1.0
        while t > 1e-10:
            f_new, g_new = _odir_objective(v - t * step, *data)
            if f_new <= f - 0.25 * t * dec:
                break
            t /= 2
        else:
            break
        v, f, g = v - t * step, f_new, g_new
        if t == 1.0 and dec < 1e-9:  # converging quadratically: the next gain ~dec^2
            break
    return v


def _folds(y: np.ndarray, n_folds: int) -> np.ndarray:
    """Fold of each sample: its rank within its class modulo n_folds, so every
    fold holds each class's share and no random draw is needed."""
    fold = np.empty(len(y), dtype=np.int64)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        fold[idx] = np.arange(len(idx)) % n_folds
    return fold


def _cv_reg(x: np.ndarray, y: np.ndarray, grid, n_folds: int) -> float:
    """The grid value with the lowest held-out NLL summed over folds (ties: the
    larger), each fold walking the grid from large to small reg."""
    k = x.shape[1] - 1
    fold = _folds(y, n_folds)
    grid = sorted(grid, reverse=True)
    loss = np.zeros(len(grid))
    for f in range(n_folds):
        train, held = fold != f, fold == f
        if not held.any():
            continue
        v = _identity(k)  # each fold from the identity, then warm-started
        for i, reg in enumerate(grid):
            v = _newton(v, (x[train], y[train], _odir_penalty(k, reg)))
            loss[i] += _nll_grad(x[held] @ v.reshape(k, k + 1).T, y[held])[0] * held.sum()
    return grid[int(np.argmin(loss))]  # argmin: first of ties, the larger reg


def fit_dirichlet(logits, labels, reg: float | None = None,
                  grid=DIRICHLET_GRID, n_folds: int = DIRICHLET_FOLDS) -> DirichletParams:
    """W, b by penalised NLL on log softmax(z). reg = lambda = mu > 0; None picks
    it from `grid` by n_folds-fold cross-validation on these samples."""
    z, y = _inputs(logits, labels, "dirichlet")
    for r in ([reg] if reg is not None else list(grid)):
        if not (np.isfinite(r) and r > 0):
            raise BenchError(f"dirichlet: reg must be a finite number > 0 (the penalty "
                             f"makes the fit unique), got {r}")
    if reg is None and (int(n_folds) != n_folds or n_folds < 2):
        raise BenchError(f"dirichlet: n_folds must be an integer >= 2, got {n_folds}")
    x, k = _log_probs(z), z.shape[1]
    with one_blas_thread():
        if reg is None:
            reg = _cv_reg(x, y, grid, int(n_folds))
        v = _newton(_identity(k), (x, y, _odir_penalty(k, reg))).reshape(k, k + 1)
    return DirichletParams(*_frozen(v[:, :k], v[:, k], reg))


def apply_dirichlet(logits, params: DirichletParams) -> np.ndarray:
    z = _check_logits(logits, "dirichlet", "test", len(params.bias))
    return softmax(_log_probs(z)[:, :-1] @ params.weights.T + params.bias)


# -------------------------------------------------- histogram binning --
HB_BINS = 15  # as the paper's ECE


@dataclasses.dataclass(frozen=True, eq=False)
class BinningParams:
    edges: tuple  # per class: [B_k - 1] interior bin edges, increasing
    values: tuple  # per class: [B_k] frequency of the class in each bin
    prior: np.ndarray  # [K] validation class frequencies (all-zero rows)


def _equal_mass_edges(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Interior edges cutting the sorted scores into runs of (almost) equal size;
    each edge is the first score of the run above it (bins are [e_j, e_j+1)).
    A cut inside a run of tied scores is dropped, merging two bins, so no bin is
    ever empty and every bin's frequency is a real one."""
    s = np.sort(scores)
    cuts = np.unique(np.round(np.linspace(0, len(s), n_bins + 1)[1:-1]).astype(np.int64))
    cuts = cuts[(cuts > 0) & (cuts < len(s))]
    return s[cuts[s[cuts - 1] < s[cuts]]]


def fit_binning(logits, labels, n_bins: int = HB_BINS) -> BinningParams:
    """Per class k: equal-mass bins of softmax(z)_k on the validation split, each
    mapped to the share of its samples whose label is k (Zadrozny and Elkan 2001)."""
    z, y = _inputs(logits, labels, "hb")
    if int(n_bins) != n_bins or n_bins < 1:
        raise BenchError(f"hb: n_bins must be an integer >= 1, got {n_bins}")
    p = softmax(z)
    edges, values = [], []
    for k in range(p.shape[1]):
        e = _equal_mass_edges(p[:, k], int(n_bins))
        idx = np.searchsorted(e, p[:, k], side="right")
        edges.append(e)  # every bin holds a sample by construction: no 0 / 0
        values.append(np.bincount(idx, weights=(y == k), minlength=len(e) + 1)
                      / np.bincount(idx, minlength=len(e) + 1))
    return BinningParams(tuple(_frozen(*edges)), tuple(_frozen(*values)), _prior(y, p.shape[1]))


def apply_binning(logits, params: BinningParams) -> np.ndarray:
    p = softmax(_check_logits(logits, "hb", "test", len(params.prior)))
    q = np.stack([v[np.searchsorted(e, p[:, k], side="right")]
                  for k, (e, v) in enumerate(zip(params.edges, params.values))], axis=1)
    return _renormalise(q, params.prior)


# ------------------------------------------------ isotonic regression --
@dataclasses.dataclass(frozen=True, eq=False)
class IsotonicParams:
    x: tuple  # per class: increasing score thresholds (scikit-learn's X_thresholds_)
    y: tuple  # per class: fitted values there (y_thresholds_), linear in between
    prior: np.ndarray  # [K] validation class frequencies (all-zero rows)


def fit_isotonic(logits, labels) -> IsotonicParams:
    """Per class k: scikit-learn's IsotonicRegression(out_of_bounds='clip') of
    1[y = k] on softmax(z)_k; its thresholds are kept, plain arrays."""
    # scikit-learn on demand: `bench list` and `import bench.api` load bench.calib, not sklearn
    from sklearn.isotonic import IsotonicRegression

    z, y = _inputs(logits, labels, "iso")
    p = softmax(z)
    xs, ys = [], []
    for k in range(p.shape[1]):  # 0/1 targets: the fitted values lie in [0, 1]
        iso = IsotonicRegression(out_of_bounds="clip").fit(p[:, k], (y == k).astype(float))
        xs.append(iso.X_thresholds_)
        ys.append(iso.y_thresholds_)
    return IsotonicParams(tuple(_frozen(*xs)), tuple(_frozen(*ys)), _prior(y, p.shape[1]))


def apply_isotonic(logits, params: IsotonicParams) -> np.ndarray:
    p = softmax(_check_logits(logits, "iso", "test", len(params.prior)))
    # np.interp holds the end values outside [x0, xn]: out_of_bounds='clip'
    q = np.stack([np.interp(p[:, k], x, v)
                  for k, (x, v) in enumerate(zip(params.x, params.y))], axis=1)
    return _renormalise(q, params.prior)


# ---------------------------------------- ensemble temperature scaling --
@dataclasses.dataclass(frozen=True, eq=False)
class EnsembleTSParams:
    temperature: np.ndarray  # [] T of plain temperature scaling
    weights: np.ndarray  # [3] on softmax(z / T), softmax(z), uniform 1/K; sum 1


def _ets_parts(z: np.ndarray, t: float) -> np.ndarray:
    k = z.shape[1]
    return np.stack([softmax(z / t), softmax(z), np.full(z.shape, 1.0 / k)], axis=-1)


def fit_ets(logits, labels) -> EnsembleTSParams:
    """T by temperature scaling, then the simplex weights of the three parts by
    NLL, convex in the weights, by SLSQP from plain TS (Zhang et al. 2020 offer
    MSE or cross-entropy for both fits; NLL here, as for every calibrator)."""
    # scipy on demand: `bench list` and `import bench.api` load bench.calib, not scipy
    from scipy.optimize import minimize

    z, y = _inputs(logits, labels, "ets")
    t = fit_temperature(z, y)
    a = _ets_parts(z, t)[np.arange(len(y)), y]  # [N, 3]: each part's p_y

    def nll(w):
        q = a @ w
        return -np.mean(np.log(q)), -(a / q[:, None]).mean(axis=0)

    w0 = np.array([1.0, 0.0, 0.0])  # plain TS
    res = minimize(nll, w0, jac=True, method="SLSQP", bounds=[(0.0, 1.0)] * 3,
                   constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0,
                                 "jac": lambda w: np.ones(3)}],
                   options={"maxiter": 200, "ftol": 1e-14})
    w = np.clip(res.x, 0.0, 1.0) / np.clip(res.x, 0.0, 1.0).sum()
    w = w if nll(w)[0] <= nll(w0)[0] else w0  # a NaN compares False: plain TS
    return EnsembleTSParams(*_frozen(t, w))


def apply_ets(logits, params: EnsembleTSParams) -> np.ndarray:
    z = _check_logits(logits, "ets", "test")
    return _ets_parts(z, float(params.temperature)) @ params.weights


# ------------------------------------------------------------- table --
class Calibrator(NamedTuple):
    fit: Callable  # (val_logits, val_labels) -> params
    apply: Callable  # (test_logits, params) -> probs [N, K]
    title: str  # one line for `bench list` and captions
    version: int = 1  # bumped when its numbers change: cached cells are recomputed
    # K -> how many numbers its fit estimates: a validation split with fewer
    # samples (or without every class) is named under the rows it fits
    params: Callable | None = None
    fitted: str = ""  # what its fit does, for the post-hoc table's footnote


CALIBRATORS: dict[str, Calibrator] = {
    "vs": Calibrator(fit_vector, apply_vector, "vector scaling (Guo et al. 2017)", 1,
                     lambda k: 2 * k, "a scale and a bias per class, validation NLL, L-BFGS"),
    "dirichlet": Calibrator(
        fit_dirichlet, apply_dirichlet, "Dirichlet calibration with ODIR (Kull et al. 2019)", 1,
        lambda k: k * (k + 1), "a K x K matrix and K biases on the log-probabilities, "
        "penalised validation NLL, ODIR lambda = mu chosen by 5-fold cross-validation on the "
        "validation split over 1e-3 ... 1e3"),
    "hb": Calibrator(fit_binning, apply_binning, "histogram binning, one-vs-rest, 15 equal-mass "
                     "bins", 1, lambda k: HB_BINS * k, f"{HB_BINS} equal-mass bins per class, "
                     "each bin's validation frequency; rows renormalised"),
    "iso": Calibrator(fit_isotonic, apply_isotonic, "isotonic regression, one-vs-rest", 1,
                      lambda k: 2 * k, "one-vs-rest per class, scikit-learn's "
                      "pool-adjacent-violators on the validation split; rows renormalised"),
    "ets": Calibrator(fit_ets, apply_ets, "ensemble temperature scaling (Zhang et al. 2020)", 1,
                      lambda k: 4, "a temperature and the weights of the scaled, unscaled "
                      "and uniform predictions, validation NLL"),
}

