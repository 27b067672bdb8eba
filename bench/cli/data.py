"""`bench data check` (`bench data shift`: bench.cli.datashift; `bench data
ood-demo`: bench.cli.oodemo), and the data
options shared with `bench run`.

`bench data check --dataset NAME [--data-root DIR] [--data-opt k=v]` prints
per-split, per-class counts next to the published totals and names every
missing or unreadable image by path (each file is fully decoded, because a
truncated JPEG opens fine and fails only on decode). Exit status 1 when any
file is bad. A damaged array in the image cache is named and set aside (the
next run rebuilds it).
"""
from __future__ import annotations


from tabulate import tabulate

from bench.cli.fields import add_fields
from bench.core.config import load_kwargs, parse_data_opts
from bench.sweep.options import DATA_OPTION_KEYS, RunOptions  # noqa: F401  (tests read the keys)


def add_data_options(p) -> None:
    """Options every data-reading command takes (--data-root is added by the
    caller): --data-opt KEY=VALUE and --download, as RunOptions declares them."""
    add_fields(p, RunOptions, only=("data_opts", "download"))


def add_parser(sub) -> None:
    p = sub.add_parser("data", help="inspect datasets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    c = dsub.add_parser("check", help="per-class counts; name every missing/unreadable image")
    c.add_argument("--dataset", required=True)
    c.add_argument("--data-root", default=None, help="where the dataset's files live")
    add_data_options(c)
    c.add_argument("--no-progress", action="store_true")
    c.set_defaults(func=check)
    from bench.cli.datashift import add_parser as add_shift

    add_shift(dsub, add_data_options)
    from bench.cli.oodemo import add_parser as add_ood_demo

    add_ood_demo(dsub)


def check_data_paths(args) -> None:
    """A data root or cache folder that is a file fails in one line (bench.sweep.plan)."""
    from bench.sweep.plan import check_data_paths as check

    check(args.data_root, args.data_opts)


# ------------------------------------------------------------------ check --
def check(args) -> int:
    from bench.datasets import DATASETS, FILE_INDEXES
    from bench.datasets.cache import verify

    DATASETS.get(args.dataset)
    check_data_paths(args)
    opts = parse_data_opts(args.data_opts)
    if args.dataset in FILE_INDEXES:
        from bench.datasets.cache import check_cache, default_cache_dir

        cache = opts.pop("cache", None)
        index = FILE_INDEXES[args.dataset](args.data_root, **opts)
        check_cache(cache or default_cache_dir(index.root))  # names and sets aside damage
        classes, labels, published = index.classes, index.labels, index.published
        by_class = index.published_classes
        paths = [p for s in ("train", "val", "test") for p in index.paths[s]]
        bad = verify(paths, progress=not args.no_progress)
    else:
        bundle = DATASETS.get(args.dataset)(
            data_root=args.data_root, image_size=0,
            **load_kwargs(args.download, not args.no_progress, args.data_opts))
        classes = bundle.classes
        labels = {s: bundle.split(s).labels for s in ("train", "val", "test")}
        published, bad, by_class = published_counts(args.dataset), [], {}
    print(count_table(classes, labels, published))
    if by_class:
        print(class_table(classes, labels, by_class))
    if bad:
        for path, why in bad:
            kind, _, detail = why.partition(": ")
            print(f"{kind.upper()}: {path}" + (f" ({detail})" if detail else ""))
        n_missing = sum(why == "missing" for _, why in bad)
        print(f"{len(bad)} bad image(s): {n_missing} missing, {len(bad) - n_missing} unreadable")
        return 1
    print(f"{args.dataset}: all {sum(len(v) for v in labels.values())} images present"
          + (" and decodable" if args.dataset in FILE_INDEXES else ""))
    return 0


def published_counts(name: str) -> dict[str, int]:
    from bench.datasets import medmnist

    if name in medmnist.FLAGS:
        return medmnist.published_counts(name)
    return {}


def class_table(classes, labels: dict, published: dict) -> str:
    """Per-class counts of split groups ('train+val') next to the published ones."""
    import numpy as np

    rows = []
    for group, pub in published.items():
        ys = np.concatenate([labels[s] for s in group.split("+")])
        counts = np.bincount(ys, minlength=len(classes))
        rows += [[group, name, int(c), p, "ok" if c == p else f"differs ({int(c) - p:+d})"]
                 for name, c, p in zip(classes, counts, pub)]
    return tabulate(rows, headers=["splits", "class", "found", "published", ""])


def count_table(classes, labels: dict, published: dict) -> str:
    """Rows = classes, columns = splits, plus total and published-total rows."""
    import numpy as np

    splits = ("train", "val", "test")
    counts = {s: np.bincount(labels[s], minlength=len(classes)) for s in splits}
    rows = [[k, name, *(int(counts[s][k]) for s in splits), int(sum(counts[s][k] for s in splits))]
            for k, name in enumerate(classes)]
    totals = [int(counts[s].sum()) for s in splits]
    rows.append(["", "total", *totals, sum(totals)])
    if published:
        pub = [published.get(s, "") for s in splits]
        pub_sum = sum(p for p in pub if p != "")
        rows.append(["", "published", *pub, pub_sum])
        diff = ["ok" if p == t else f"differs ({t - p:+d})" for p, t in zip(pub, totals)
                if p != ""]
        rows.append(["", "vs published", *diff, ""])
    return tabulate(rows, headers=["id", "class", *splits, "all"], tablefmt="simple")
