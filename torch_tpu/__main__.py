"""``python -m torch_tpu``: prints the environment report (``--json`` for a machine-readable form)."""
from __future__ import annotations

import argparse
import json

from . import _env


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m torch_tpu", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    info = _env.collect()
    print(json.dumps(info, indent=2) if args.json else _env.report(info))


if __name__ == "__main__":
    main()
