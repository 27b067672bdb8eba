"""Training in float64 inside a test: every model built by the harness cast to
float64 and the images it sees normalised to float64.

Why: a fused or batched group reassociates float32 sums, and within ~10 steps
some ReLU or max-pool input that sits at a kink flips the other way and moves
a parameter by ~5e-4 (measured on smallcnn: 4hml seed 2 at step 12, the
vmapped group as much). No float32 tolerance after many steps then tells a
correct group from a wrong one. In float64 the same comparison holds to
1e-9 relative, so a test of "each member equals its run alone" is a test of
the algebra."""
from __future__ import annotations


def in_float64(monkeypatch) -> None:
    from bench.train import experiment, fused, loop
    for module in (fused, loop):
        monkeypatch.setattr(module, "normalise",
                            lambda x, *a, _f=loop.normalise: _f(x, *a).double())
    built = experiment.init_model

    def init_model(*args, **kwargs):
        model, backbone = built(*args, **kwargs)
        return model.double(), backbone
    monkeypatch.setattr(experiment, "init_model", init_model)
