"""A live single-node Slurm cluster for the SLURM tests (tests/slurmcluster.py)."""
import os

import pytest

import slurmcluster


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """Started once per session (installed with apt-get where missing, as root),
    stopped by pid at the end, also when tests fail. SLURM_CONF and PATH point
    every client (sbatch, squeue, submitit) at it for the session."""
    try:
        cluster = slurmcluster.start(tmp_path_factory.mktemp("slurm"))
    except slurmcluster.Unavailable as why:
        # A cluster that cannot start fails the SLURM tests, never skips them: a
        # skip would let a broken cluster path pass unseen. A machine without
        # root or apt leaves them out in the open, counted as deselected.
        pytest.fail(f"live Slurm cluster unavailable: {why} (on a machine without root "
                    "or apt: ./test.sh -m 'not slurm')")
    saved = {k: os.environ.get(k) for k in ("SLURM_CONF", "PATH")}
    os.environ.update(SLURM_CONF=cluster.env["SLURM_CONF"], PATH=cluster.env["PATH"])
    try:
        yield cluster
    finally:
        cluster.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
