"""A derived row of saved records as the tests check it: the stored measures
of one variant (bench.calib.variants) of the records at `paths`, and what the
variant fitted (the temperature, the ensemble's members)."""
from bench.calib import measures as M
from bench.calib.temperature import scaled_probs
from bench.calib import variants as V
from bench.core.record import Record


def derived(variant: str, paths) -> dict:
    v = V.get(variant)
    preds = [Record(p).predictions for p in paths]
    probs, labels, info = v.apply(preds if v.ensemble else preds[0])
    out = {**info, "test": M.compute(probs, labels, M.stored())}
    if "temperature" in info:  # the validation split at the fitted T, too
        p = preds[0]
        val = scaled_probs(p["val_logits"], info["temperature"])
        out["val"] = M.compute(val, p["val_labels"], M.stored())
    return out


def temperature_scaled(path) -> dict:
    return derived("ts", [path])


def deep_ensemble(paths) -> dict:
    return derived("dens", paths)
