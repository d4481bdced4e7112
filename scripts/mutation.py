"""Mutation testing of the numerical core (ssmts/nn and the losses), run as a script.

    pip install -e ".[mutation]"
    python scripts/mutation.py run [--max-children 2] [PATTERN ...]   # mutmut, one thread per worker
    python scripts/mutation.py recheck [--max-children 2]             # after new tests: survivors again
    python scripts/mutation.py timeouts                                # each timeout again, alone
    python scripts/mutation.py report [--list]                         # per module; unexplained survivors

`run` plants one-line bugs with mutmut (configured in pyproject.toml) and runs the tests that reach
each one. Workers are forked from the process that ran the tests once, so PyTorch's thread pools are
limited to one thread (a pool started in the parent deadlocks a forked child; it shows up as a
timeout). Run again, mutmut checks only the mutants of functions changed since and maps only new
tests to functions; it keeps every other result until asked by name. So `recheck` maps every test
afresh, checks the changed functions, and then runs every mutant not killed once more, with the
tests as they are now. `timeouts` runs each mutant reported as a timeout alone, in a fresh process
with a generous limit (a busy machine overruns mutmut's limit, which it sets from the unmutated
run). `report` counts per module and lists the survivors that `scripts/mutation-equivalent.json`
does not explain; an explanation names the mutant, the line it changes (so that a stale one is
noticed when the code moves) and why no test can tell it apart. The goal: no survivor left
unexplained.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
EQUIVALENT = Path(__file__).with_name("mutation-equivalent.json")
ALONE = MUTANTS / "timeouts-alone.json"
ALONE_LIMIT_S = 900
# A mutant that grows an array forever (a loop bound on the wrong axis) must not take the machine's
# memory: each rerun alone gets this much data segment, and running out counts as noticed.
ALONE_MEMORY_BYTES = 6 * 2**30
# mutmut's exit codes (mutmut.stats.status_by_exit_code); anything else is "suspicious".
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", None: "not checked"}
STATUS.update({code: "timeout" for code in (36, -24, 24, 152, 255)})
STATUS.update({-11: "segfault", -9: "segfault"})


def one_thread_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def read_results() -> dict[str, str]:
    """Every mutant's status, after the `timeouts` reruns: {mutant name: status}."""
    if not MUTANTS.is_dir():
        sys.exit("no mutants/ here: run `python scripts/mutation.py run` first")
    results = {}
    for meta in sorted(MUTANTS.glob("ssmts/**/*.py.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            results[name] = STATUS.get(code, "suspicious")
    if ALONE.exists():
        results.update(json.loads(ALONE.read_text()))
    return results


def module_of(name: str) -> str:
    """'ssmts.nn.ssm.xǁSSMǁforward__mutmut_3' -> 'ssmts.nn.ssm'."""
    return re.sub(r"\.x[_ǁ].*$", "", name)


def function_of(name: str) -> str:
    return re.sub(r"__mutmut_\d+$", "", name)


def changed_line(name: str) -> str:
    """The mutated line as `mutmut show` prints it (the diff's '+' lines, stripped), or the line a
    mutant removes ('removed: ...')."""
    from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant  # mutmut's own `show`, in process

    os.chdir(ROOT)
    lines = get_diff_for_mutant(name, path=find_mutant(name).path).splitlines()
    added = [line[1:].strip() for line in lines if line.startswith("+") and not line.startswith("+++")]
    removed = [line[1:].strip() for line in lines if line.startswith("-") and not line.startswith("---")]
    return " / ".join(added) if added else "removed: " + " / ".join(removed)


def run(args) -> int:
    command = ["mutmut", "run", "--max-children", str(args.max_children), *args.patterns]
    return subprocess.run(command, cwd=ROOT, env=one_thread_env()).returncode


def recheck(args) -> int:
    # mutmut maps only new tests to functions on a later run, so an old test that reaches a new or
    # changed function would not run against its mutants: map every test afresh (a few minutes).
    (MUTANTS / "mutmut-stats.json").unlink(missing_ok=True)
    code = run(argparse.Namespace(max_children=args.max_children, patterns=[]))
    if code:
        return code
    again = sorted(n for n, s in read_results().items() if s in ("survived", "timeout", "no tests", "suspicious"))
    if ALONE.exists():
        ALONE.unlink()  # the reruns below replace them
    if not again:
        return 0
    print(f"checking {len(again)} mutants not killed again", flush=True)
    return run(argparse.Namespace(max_children=args.max_children, patterns=again))


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (ALONE_MEMORY_BYTES, ALONE_MEMORY_BYTES))


def timeouts(args) -> int:
    stats = json.loads((MUTANTS / "mutmut-stats.json").read_text())["tests_by_mangled_function_name"]
    alone = json.loads(ALONE.read_text()) if ALONE.exists() else {}
    pending = [n for n, s in read_results().items() if s == "timeout" and n not in alone]
    for i, name in enumerate(pending, 1):
        tests = sorted(stats.get(function_of(name), []))
        env = {**one_thread_env(), "MUTANT_UNDER_TEST": name}
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
        try:
            code = subprocess.run(
                command, cwd=MUTANTS, env=env, capture_output=True, timeout=ALONE_LIMIT_S, preexec_fn=_limit_memory
            ).returncode
            # pytest's 1: a test failed; a process killed by the system (out of memory) also counts as noticed.
            alone[name] = "survived" if code == 0 else "killed" if code in (1, 3, -9, 137) else f"exit {code}"
        except subprocess.TimeoutExpired:
            alone[name] = "timeout"
        print(f"[{i}/{len(pending)}] {name}: {alone[name]}", flush=True)
        ALONE.write_text(json.dumps(alone, indent=1, sort_keys=True))
    return 0


def report(args) -> int:
    results = read_results()
    explained = json.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    counts: dict[str, Counter] = defaultdict(Counter)
    unexplained = []
    for name, status in results.items():
        if status == "survived" and name in explained:
            status = "equivalent"
        counts[module_of(name)][status] += 1
        if status in ("survived", "no tests", "timeout", "suspicious", "segfault"):
            unexplained.append((name, status))
    columns = ["killed", "equivalent", "survived", "no tests", "timeout", "not checked"]
    print(f"{'module':34} {'mutants':>7} " + " ".join(f"{c:>11}" for c in columns) + "  other")
    total = Counter()
    for module in sorted(counts):
        row = counts[module]
        total.update(row)
        other = sum(v for k, v in row.items() if k not in columns)
        print(f"{module:34} {sum(row.values()):7d} " + " ".join(f"{row[c]:11d}" for c in columns) + f"  {other}")
    checked = sum(total.values()) - total["not checked"]
    print(f"{'all':34} {sum(total.values()):7d} " + " ".join(f"{total[c]:11d}" for c in columns))
    if checked:
        print(
            f"killed {total['killed']} of {checked} checked ({100 * total['killed'] / checked:.1f} %); "
            f"killed or explained as equivalent: {100 * (total['killed'] + total['equivalent']) / checked:.1f} %"
        )
    stale = [n for n in explained if results.get(n) != "survived"]
    moved = [n for n in explained if results.get(n) == "survived" and changed_line(n) != explained[n]["line"]]
    if stale or moved:
        print(f"explanations to revisit: {len(stale)} of mutants now killed or gone, {len(moved)} whose line changed")
        for name in stale + moved:
            print(f"  {name}")
    print(f"unexplained: {len(unexplained)}")
    if args.list:
        for name, status in sorted(unexplained):
            print(f"  {status:9} {name}: {changed_line(name)}")
    return 1 if unexplained or moved else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="mutmut run with one thread per worker")
    run_parser.add_argument("--max-children", type=int, default=os.cpu_count() or 1)
    run_parser.add_argument("patterns", nargs="*", help='mutant names or patterns, e.g. "ssmts.nn.scan*"')
    recheck_parser = commands.add_parser("recheck", help="changed functions, then every mutant not killed, again")
    recheck_parser.add_argument("--max-children", type=int, default=os.cpu_count() or 1)
    commands.add_parser("timeouts", help="rerun each timeout alone in a fresh process")
    report_parser = commands.add_parser("report", help="counts per module; unexplained survivors")
    report_parser.add_argument("--list", action="store_true", help="list the unexplained mutants and their lines")
    args = parser.parse_args(argv)
    return {"run": run, "recheck": recheck, "timeouts": timeouts, "report": report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
