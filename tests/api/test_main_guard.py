"""A script calling bench.api outside `if __name__ == "__main__":` stops in one
line before anything runs (the pool's workers re-import the script and would
run it again, failing every run); with the guard, or under a notebook or
`python -c`, nothing is refused. Each case is a real script in its own
interpreter: what is checked is that interpreter's `__main__` and stack."""
import subprocess
import sys
import textwrap

import pytest

GUARD_LINE = ('outside `if __name__ == "__main__":`; the worker processes re-import the script '
              'and would run it again, so every run would fail; put the script\'s calls under '
              'that guard (docs/api.md, "From a script")')


def _run_script(tmp_path, source: str, *args) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, *args, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


def test_a_script_without_the_guard_stops_before_any_run(tmp_path):
    """The dry run (no worker) goes through; the training call stops, and no
    record, log or lock was written for it."""
    out = _run_script(tmp_path, """\
        import bench.api as api
        grid = dict(method="sl1h", dataset="digits", backbone="smallcnn", seeds=1,
                    profile="quick", overrides={"cycles": 1, "image_size": 16},
                    data_opts={"train_per_class": 10}, results="res")
        print(api.run(dry_run=True, **grid)["status"].tolist())
        runs = api.run(**grid)
        print("trained", runs["status"].tolist())
        """)
    assert out.returncode == 1 and out.stdout == "['missing']\n"
    assert out.stderr.splitlines()[-1] == (
        f"bench.core.errors.BenchError: bench.api.run: called from line 6 of "
        f"{tmp_path / 'script.py'}, {GUARD_LINE}")
    assert not [p for p in (tmp_path / "res").rglob("*") if p.is_file()]


@pytest.mark.parametrize("source", [
    """\
    from bench.sweep.mainguard import require_guard
    if __name__ == "__main__":
        require_guard("bench.api.run")
    """,
    """\
    from bench.sweep.mainguard import require_guard


    def main():
        require_guard("bench.api.run")


    if "__main__" == __name__:
        main()
    """,
    """\
    from bench.sweep.mainguard import require_guard
    if __name__ != "__main__":
        pass
    else:
        for _ in range(1):
            require_guard("bench.api.run")
    """,
])
def test_a_call_under_the_guard_passes(tmp_path, source):
    out = _run_script(tmp_path, source + 'print("passed")\n')
    assert (out.returncode, out.stdout, out.stderr) == (0, "passed\n", "")


@pytest.mark.parametrize("source, line", [
    ("""\
    from bench.sweep.mainguard import require_guard


    def main():
        require_guard("bench.api.run")


    main()
    """, 8),
    ("""\
    from bench.sweep.mainguard import require_guard
    if __name__ != "__main__":
        pass
    require_guard(
        "bench.api.run")
    """, 4),
])
def test_a_call_outside_the_guard_is_refused_at_the_scripts_line(tmp_path, source, line):
    """A function called from the unguarded top level is refused too: the line
    named is the script's own statement that leads to the call."""
    out = _run_script(tmp_path, source)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == (
        f"bench.core.errors.BenchError: bench.api.run: called from line {line} of "
        f"{tmp_path / 'script.py'}, {GUARD_LINE}")


def test_no_script_no_refusal(tmp_path):
    """`python -c` (and a notebook, the REPL): no file for the workers to re-run."""
    out = subprocess.run([sys.executable, "-c", "from bench.sweep.mainguard import "
                          "require_guard; require_guard('bench.api.run'); print('passed')"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert (out.returncode, out.stdout) == (0, "passed\n")
