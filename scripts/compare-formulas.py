#!/usr/bin/env python3
"""Compare how public Salt formulas compile under halite and under Salt.

Usage:
    scripts/compare-formulas.py [options] FORMULA_DIR [FORMULA_DIR ...]

Each FORMULA_DIR is a checkout of a formula repository (for example a
saltstack-formulas/*-formula snapshot unpacked under /tmp/formulas/<name>).
The script never contains or copies formula code into this repository: for
each formula it builds a throw-away test tree under --work (default
/tmp/halite-formula-compare/<name>):

    file/<sls dir>/...   a copy of the formula's state directory
    file/top.sls         base: '*': [<sls dir>]
    pillar/<name>.sls    the formula's own pillar.example
    pillar/top.sls       base: '*': [<name>]
    conf/minion          id, file_client: local, dirs under the work dir, and
                         FIXED grains so both tools see the same ones

Then it runs `state.show_sls <sls>`, `state.show_low_sls <sls>` and
`state.show_lowstate` with `salt-call --local` and with `halite-call --local`
(both with --out json), compares the parsed JSON and prints a summary, and
writes the outputs and a unified diff of each view next to the test tree.

Almost nothing is normalised: show_* output has no jids or timings; the one
volatile kind seen in real formulas, a date-time printed by a template
(`status.time`), is replaced by <now>. Dict key order is reported
separately from value equality; lists are compared in order.

Options:
    --salt PATH        salt-call (default /root/.venvs/salt/bin/salt-call)
    --halite PATH      halite-call (default target/debug/halite-call of this repo)
    --work DIR         where the test trees go
    --sls NAME         compare only this sls (repeatable); default: the
                       formula's top sls (its state directory name)
    --all-sls          also compare show_sls/show_low_sls of every .sls file in
                       the formula's state directory
    --json FILE        write the summary as JSON too
"""

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

FIXED_GRAINS = {
    "os": "Debian",
    "os_family": "Debian",
    "osfinger": "Debian-12",
    "oscodename": "bookworm",
    "lsb_distrib_codename": "bookworm",
    "lsb_distrib_id": "Debian",
    "lsb_distrib_release": "12",
    "osfullname": "Debian",
    "osmajorrelease": 12,
    "osrelease": "12",
    "osrelease_info": [12],
    "osarch": "amd64",
    "cpuarch": "x86_64",
    "kernel": "Linux",
    "init": "systemd",
    "virtual": "physical",
    "host": "formula-test",
    "nodename": "formula-test",
    "fqdn": "formula-test.example.com",
    "domain": "example.com",
    "saltversion": "3008.5",
    "saltversioninfo": [3008, 5],
    "pythonversion": [3, 11, 0, "final", 0],
    "num_cpus": 2,
    "mem_total": 4096,
    "ipv4": ["127.0.0.1", "192.0.2.10"],
    "ipv6": ["::1"],
    "fqdn_ip4": ["192.0.2.10"],
    "fqdn_ip6": [],
    "selinux": {"enabled": False, "enforced": "Disabled"},
    "systemd": {"version": "252", "features": ""},
}

SKIP_DIRS = {"test", "docs", "bin", "_pillar", ".github", "_mapdata", "pillar"}


def find_sls_dir(formula: Path) -> Path:
    """The formula's state directory: a subdir with init.sls."""
    base = formula.name
    if base.endswith("-formula"):
        base = base[: -len("-formula")]
    cands = [
        d
        for d in sorted(formula.iterdir())
        if d.is_dir() and d.name not in SKIP_DIRS and (d / "init.sls").exists()
    ]
    for d in cands:
        if d.name == base:
            return d
    if not cands:
        raise SystemExit(f"{formula}: no state directory with init.sls")
    return cands[0]


def yaml_dump(obj) -> str:
    """Tiny YAML writer (JSON is YAML) so the script needs no PyYAML."""
    return json.dumps(obj, indent=2)


def build_tree(formula: Path, work: Path, pillar: str = "pillar.example"):
    sls_dir = find_sls_dir(formula)
    name = sls_dir.name
    label = name if pillar == "pillar.example" else f"{name}+{Path(pillar).stem}"
    root = work / label
    if root.exists():
        shutil.rmtree(root)
    froot = root / "file"
    proot = root / "pillar"
    conf = root / "conf"
    for d in (froot, proot, conf, root / "cache", root / "pki", root / "sock"):
        d.mkdir(parents=True)
    # Copy (not symlink): halite's fileserver refuses symlinks leaving the root.
    shutil.copytree(sls_dir, froot / name, symlinks=False)
    (froot / "top.sls").write_text(f"base:\n  '*':\n    - {name}\n")
    example = formula / pillar
    if example.exists():
        shutil.copyfile(example, proot / f"{name}.sls")
    else:
        (proot / f"{name}.sls").write_text("{}\n")
    (proot / "top.sls").write_text(f"base:\n  '*':\n    - {name}\n")
    minion = {
        "id": "formula-test",
        "file_client": "local",
        "cachedir": str(root / "cache"),
        "pki_dir": str(root / "pki"),
        "sock_dir": str(root / "sock"),
        "log_file": str(root / "minion.log"),
        "log_level_logfile": "warning",
        "file_roots": {"base": [str(froot)]},
        "pillar_roots": {"base": [str(proot)]},
        "grains": dict(FIXED_GRAINS, id="formula-test"),
    }
    (conf / "minion").write_text(yaml_dump(minion) + "\n")
    return name, label, sls_dir, root


def run(tool: str, root: Path, args, timeout=600):
    cmd = [
        tool,
        "--local",
        "--config-dir",
        str(root / "conf"),
        "--file-root",
        str(root / "file"),
        "--pillar-root",
        str(root / "pillar"),
        "--out",
        "json",
        "-l",
        "quiet",
    ] + list(args)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"rc": None, "out": None, "raw": "", "err": "timeout"}
    out = None
    try:
        out = normalise(json.loads(p.stdout))
    except ValueError:
        pass
    return {"rc": p.returncode, "out": out, "raw": p.stdout, "err": p.stderr}


# The only volatile values show_* output can hold come from templates that
# print the current time (postgres-formula's pillar: status.time). Replace
# date-times of the shapes strftime usually gives; nothing else is touched.
VOLATILE = [
    re.compile(r"\d{2,4}-\d{2}-\d{2}[_ T]\d{2}:\d{2}:\d{2}(\.\d+)?"),
]


def normalise(v):
    if isinstance(v, str):
        for rx in VOLATILE:
            v = rx.sub("<now>", v)
        return v
    if isinstance(v, list):
        return [normalise(x) for x in v]
    if isinstance(v, dict):
        return {normalise(k): normalise(x) for k, x in v.items()}
    return v


def walk_diff(a, b, path="", out=None, limit=200):
    """Paths where a and b differ (dicts by key, lists by index)."""
    if out is None:
        out = []
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                out.append((f"{path}/{k}", "only in salt", a[k], None))
            else:
                walk_diff(a[k], b[k], f"{path}/{k}", out, limit)
        for k in b:
            if k not in a:
                out.append((f"{path}/{k}", "only in halite", None, b[k]))
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            walk_diff(x, y, f"{path}[{i}]", out, limit)
        if len(a) != len(b):
            out.append((f"{path}", f"length salt={len(a)} halite={len(b)}",
                        a[len(b):], b[len(a):]))
    elif a != b or type(a) is not type(b):
        # 1 == 1.0 == True in Python; JSON types matter here.
        if not (a == b and type(a) is type(b)):
            out.append((path, "value", a, b))
    return out


def key_order_diffs(a, b, path="", out=None, limit=50):
    if out is None:
        out = []
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        ka, kb = [k for k in a if k in b], [k for k in b if k in a]
        if ka != kb:
            out.append((path or "/", ka, kb))
        for k in ka:
            key_order_diffs(a[k], b[k], f"{path}/{k}", out, limit)
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            key_order_diffs(x, y, f"{path}[{i}]", out, limit)
    return out


def short(v, n=160):
    s = json.dumps(v, sort_keys=False)
    return s if len(s) <= n else s[: n - 3] + "..."


def compare_view(name, root, view, args, salt, halite):
    s = run(salt, root, args)
    h = run(halite, root, args)
    outdir = root / "out"
    outdir.mkdir(exist_ok=True)
    tag = "_".join([view] + [a.replace("/", "_") for a in args[1:]])
    for who, r in (("salt", s), ("halite", h)):
        (outdir / f"{tag}.{who}.json").write_text(r["raw"])
        (outdir / f"{tag}.{who}.stderr").write_text(r["err"])
    res = {"formula": name, "view": view, "args": args,
           "salt_rc": s["rc"], "halite_rc": h["rc"]}
    if s["out"] is None and h["out"] is not None and s["rc"] and h["rc"]:
        # salt-call prints some errors (a pillar that fails to render) as
        # text on stderr; halite may print them as a JSON list instead.
        res["status"] = "both fail"
        res["detail"] = ("salt stderr: " + s["err"].strip()[-300:] +
                         "\nhalite stdout: " + h["raw"].strip()[-300:])
        return res
    if s["out"] is None or h["out"] is None:
        res["status"] = "error"
        last = lambda t: (t.strip().splitlines() or [""])[-1][:300]
        res["detail"] = ("salt output not JSON: " + last(s["err"]) if s["out"] is None
                         else "halite output not JSON: " + last(h["err"]))
        return res
    diffs = walk_diff(s["out"], h["out"])
    order = key_order_diffs(s["out"], h["out"]) if not diffs else []
    if s["rc"] != h["rc"]:
        diffs.append(("(exit code)", "value", s["rc"], h["rc"]))
    if diffs and all(d[0] == "(exit code)" for d in diffs):
        res["status"] = "same JSON, exit code differs"
        res["diffs"] = [(p, k, short(a), short(b)) for p, k, a, b in diffs]
    elif not diffs and not order:
        res["status"] = "identical"
    elif not diffs:
        res["status"] = "key order only"
        res["order"] = [(p, a, b) for p, a, b in order[:10]]
    else:
        res["status"] = "differs"
        res["diffs"] = [(p, k, short(a), short(b)) for p, k, a, b in diffs]
    sa = json.dumps(s["out"], indent=2).splitlines()
    ha = json.dumps(h["out"], indent=2).splitlines()
    (outdir / f"{tag}.diff").write_text(
        "\n".join(difflib.unified_diff(sa, ha, "salt", "halite", lineterm="")) + "\n")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("formulas", nargs="+",
                    help="DIR or DIR:PILLAR (a pillar file relative to DIR "
                         "to use instead of pillar.example)")
    ap.add_argument("--salt", default="/root/.venvs/salt/bin/salt-call")
    ap.add_argument("--halite", default=str(REPO / "target/debug/halite-call"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/halite-formula-compare"))
    ap.add_argument("--sls", action="append", default=[])
    ap.add_argument("--all-sls", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--max-diffs", type=int, default=8)
    opts = ap.parse_args()

    results = []
    for spec in opts.formulas:
        f, _, pillar = str(spec).partition(":")
        f = Path(f).resolve()
        name, label, sls_dir, root = build_tree(f, opts.work, pillar or "pillar.example")
        targets = opts.sls or [name]
        if opts.all_sls:
            for p in sorted(sls_dir.rglob("*.sls")):
                rel = p.relative_to(sls_dir).with_suffix("")
                parts = [name] + [x for x in rel.parts if x != "init"]
                sls = ".".join(parts)
                if sls not in targets:
                    targets.append(sls)
        for sls in targets:
            for view in ("state.show_sls", "state.show_low_sls"):
                results.append(compare_view(label, root, view, [view, sls],
                                            opts.salt, opts.halite))
        results.append(compare_view(label, root, "state.show_lowstate",
                                    ["state.show_lowstate"], opts.salt, opts.halite))

    for r in results:
        tgt = " ".join(r["args"][1:]) or "(top)"
        print(f"{r['formula']:10} {r['view']:22} {tgt:32} {r['status']}"
              f"  rc salt={r['salt_rc']} halite={r['halite_rc']}")
        if r.get("detail"):
            print("    " + r["detail"].replace("\n", "\n    "))
        for p, a, b in r.get("order", [])[:3]:
            print(f"    key order at {p}: salt={a} halite={b}")
        for p, k, a, b in r.get("diffs", [])[: opts.max_diffs]:
            print(f"    {p}: {k}\n      salt:   {a}\n      halite: {b}")
        if len(r.get("diffs", [])) > opts.max_diffs:
            print(f"    ... {len(r['diffs']) - opts.max_diffs} more")
    n_ident = sum(r["status"] == "identical" for r in results)
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print("\n" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print(f"{n_ident}/{len(results)} views identical")
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2))
    return 0 if n_ident == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
