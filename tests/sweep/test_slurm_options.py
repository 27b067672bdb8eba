"""The SLURM executor's pure parts, without a cluster: GRES parsing, signal
timing, the sacct warning said once, sbatch errors naming the option."""
import logging

from bench.sweep.slurm import OnceFilter, gpu_count, scheduler_error, signal_delay


def test_gpu_count_reads_sinfo_gres():
    assert gpu_count("(null)") == 0
    assert gpu_count("gpu:4") == 4
    assert gpu_count("gpu:a100:4(S:0-1)") == 4
    assert gpu_count("gpu:a100:2,gpu:v100:2,shard:8") == 4
    assert gpu_count("shard:8,mps:100") == 0


def test_signal_delay_fits_short_limits():
    assert signal_delay(120) == 90
    assert signal_delay(1) == 15
    assert signal_delay(4) == 60


def test_sacct_warning_said_once():
    f = OnceFilter()
    OnceFilter.said = False

    def rec(msg):
        return logging.LogRecord("submitit", logging.WARNING, __file__, 1, msg, (), None)

    said = [f.filter(rec(f"Call #{i} - Bypassing sacct error boom")) for i in range(5)]
    assert said == [True, False, False, False, False]
    assert f.filter(rec("another warning"))


def test_sbatch_errors_name_the_option():
    cases = {
        "sbatch: error: Invalid generic resource (gres) specification": "--gpus-per-job",
        "sbatch: error: invalid partition specified: gpu": "--partition",
        "sbatch: error: Requested time limit is invalid (missing or exceeds some limit)":
            "--time",
        "sbatch: error: CPU count per node can not be satisfied": "--cpus-per-job",
    }
    for text, option in cases.items():
        message = str(scheduler_error(RuntimeError(f"Command failed\n{text}\n"), None))
        assert "\n" not in message and message.endswith(f"check {option}"), message
        assert text in message
