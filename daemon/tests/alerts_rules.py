#!/usr/bin/env python3
"""The alert rules against a real rackgated's /metrics (daemon/tests/alerts.sh).

  alerts_rules.py names RULES BEFORE AFTER DOC SOURCE_ROOT
      Every metric an alert's expression names is in the scraped exposition
      (BEFORE or AFTER), every label it matches, groups or ignores is a label
      of that metric there, and every value it matches with = (or =~) is a
      value of that label there. A series that appears once observed
      (docs/observability.md's table of them, DOC) is checked against that
      table's labels and must be a string in the daemon's source instead.
  alerts_rules.py doc RULES DOC
      DOC's "Alert rules" table lists every alert, and only those, with the
      rules' `for` and severity.
  alerts_rules.py cases RULES CASES BEFORE AFTER LEFT_AT DOC OUT
      Writes promtool's unit test files from CASES and prints their names
      (OUT, and OUT-<interval>.yml for cases sampled at another interval
      than 1m): each case's input
      series is the one scraped series its `select` names (its name and
      every label as scraped, plus instance and job as Prometheus adds
      them), its values in promtool's notation with $before, $after (the
      series' value in each scrape) and $left (AFTER's value minus LEFT_AT,
      seconds until a timestamp). Every alert must have a case that fires
      and one that does not; a case marked `driven` needs $before != $after.

Exit 1 with one line per problem on stderr.
"""
import re
import sys

import yaml

INSTANCE = {"instance": "appliance-a:8443", "job": "rackgate"}
# The words of PromQL that look like a metric name.
METRIC = re.compile(r"\b((?:rackgate|process)_[a-z0-9_]+)\s*(\{[^}]*\})?")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
TEMPLATE = re.compile(r"\{\{\s*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


def parse_exposition(path):
    """{name: [(labels dict, value float)]} of a text exposition."""
    out = {}
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)$", line)
        if not m:
            raise SystemExit(f"{path}: unreadable line {line!r}")
        labels = {k: v for k, _, v in MATCHER.findall(m.group(2) or "")}
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def once_observed(doc_path):
    """{name: set(labels)} of docs/observability.md's "Series that appear once observed"."""
    out, on = {}, False
    for line in open(doc_path, encoding="utf-8"):
        if line.startswith("#"):
            on = line.strip() == "### Series that appear once observed"
            continue
        m = re.match(r"\| `([a-z_]+)` \| [a-z]+ \| (.*?) \|", line) if on else None
        if m:
            # The label names, not the values listed in parentheses.
            out[m.group(1)] = set(re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", m.group(2))))
    return out


def alerts(rules_path):
    return [r for g in yaml.safe_load(open(rules_path))["groups"] for r in g["rules"] if "alert" in r]


def in_source(name, root):
    import pathlib
    needle = f'"{name}"'
    for sub in ("daemon", "core", "kube", "base"):
        for p in pathlib.Path(root, sub).rglob("*.cc"):
            if not p.name.endswith("_test.cc") and needle in p.read_text(errors="replace"):
                return True
    return False


def check_expr(alert, series, observed, root, problems):
    expr, name = alert["expr"], alert["alert"]
    used = set()
    for metric, braces in METRIC.findall(expr):
        used.add(metric)
        if metric in series:
            rows = [labels for labels, _ in series[metric]]
            known = set().union(*rows)
        elif metric in observed:
            if not in_source(metric, root):
                problems.append(f"{name}: {metric} (once observed) is in no source file")
            rows, known = None, observed[metric]
        else:
            problems.append(f"{name}: {metric} is not in /metrics nor among the series that appear once observed")
            continue
        for label, op, value in MATCHER.findall(braces or ""):
            if label not in known:
                problems.append(f"{name}: {metric} has no label {label}")
            elif rows is not None and op == "=" and not any(r.get(label) == value for r in rows):
                problems.append(f'{name}: {metric} has no series with {label}="{value}"')
            elif rows is not None and op == "=~":
                for alt in value.split("|"):
                    if not any(r.get(label) == alt for r in rows):
                        problems.append(f'{name}: {metric} has no series with {label}="{alt}"')
    labels_of_used = set()
    for metric in used:
        labels_of_used |= observed.get(metric, set())
        labels_of_used |= set().union(*[l for l, _ in series.get(metric, [])])
    for group in GROUPING.findall(expr):
        for label in filter(None, (x.strip() for x in group.split(","))):
            if label not in labels_of_used and label not in INSTANCE:
                problems.append(f"{name}: groups by {label}, which no metric of the expression has")
    for text in alert.get("annotations", {}).values():
        for label in TEMPLATE.findall(text):
            if label not in labels_of_used and label not in INSTANCE:
                problems.append(f"{name}: its annotations name {label}, which no metric of the expression has")
    if not used:
        problems.append(f"{name}: its expression names no rackgate metric")


def cmd_names(rules, before, after, doc, root):
    series = parse_exposition(before)
    for k, v in parse_exposition(after).items():
        series.setdefault(k, []).extend(v)
    observed = once_observed(doc)
    if not observed:
        return [f"{doc}: no table of series that appear once observed"]
    problems = []
    for a in alerts(rules):
        check_expr(a, series, observed, root, problems)
    return problems


def parse_select(text):
    m = re.match(r"([a-z_:][a-z0-9_:]*)(\{.*\})?$", text.strip())
    if not m:
        raise SystemExit(f"unreadable select {text!r}")
    return m.group(1), {k: v for k, _, v in MATCHER.findall(m.group(2) or "")}


def series_text(name, labels):
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def resolve(sel, before, after, left_at, observed, problems, where):
    """(series text, labels, values) for one input series of a case."""
    name, want = parse_select(sel["select"])
    values = str(sel["values"])
    if sel.get("once_observed"):
        if name not in observed or set(want) != observed[name]:
            problems.append(f"{where}: {sel['select']} does not have the labels docs/observability.md lists")
        labels = dict(want)
    else:
        hits = [l for l, _ in after.get(name, []) if all(l.get(k) == v for k, v in want.items())]
        if len(hits) != 1:
            problems.append(f"{where}: {sel['select']} matches {len(hits)} scraped series, not 1")
            return None
        labels = hits[0]
        b = [v for l, v in before.get(name, []) if l == labels]
        a = [v for l, v in after.get(name, []) if l == labels][0]
        if "$before" in values and not b:
            problems.append(f"{where}: {sel['select']} was not scraped before")
            return None
        if sel.get("driven") and b and b[0] == a:
            problems.append(f"{where}: {sel['select']} did not move ({a}): the test did not drive it")
        # "$before x5" reads as "0x5": a placeholder takes the x or + after it.
        values = re.sub(r"(\$(?:before|after|left))\s+(?=[x+])", r"\1", values)
        values = values.replace("$before", num(b[0]) if b else "").replace("$after", num(a))
        values = values.replace("$left", num(round(a - left_at)))
    full = dict(labels, **INSTANCE)
    return series_text(name, full), labels, values


def num(v):
    """A value as promtool's notation reads it (no exponent for whole numbers)."""
    return f"{v:.0f}" if v == int(v) else repr(v)


def render(text, labels):
    out = TEMPLATE.sub(lambda m: labels.get(m.group(1), ""), text)
    if "{{" in out:
        raise SystemExit(f"the test renders only {{{{ $labels.X }}}}: {text!r}")
    return out


def make_test(alert, case, before, after, left_at, observed, problems, where):
    inputs, first = [], None
    for sel in case["series"]:
        r = resolve(sel, before, after, left_at, observed, problems, where)
        if r is None:
            return None
        inputs.append({"series": r[0], "values": r[2]})
        first = first if first is not None else r[1]
    exp = []
    if case["fires"]:
        kept = case["labels"] if "labels" in case else first
        labels = dict(kept, **INSTANCE, **alert.get("labels", {}))
        exp = [{"exp_labels": labels,
                "exp_annotations": {k: render(v, labels) for k, v in alert.get("annotations", {}).items()}}]
    return {"name": where, "interval": case.get("interval", "1m"), "input_series": inputs,
            "alert_rule_test": [{"eval_time": case["eval"], "alertname": alert["alert"], "exp_alerts": exp}]}


def cmd_cases(rules, cases_path, before_path, after_path, left_at, doc, out):
    before, after = parse_exposition(before_path), parse_exposition(after_path)
    observed = once_observed(doc)
    cases = yaml.safe_load(open(cases_path))
    by_name = {a["alert"]: a for a in alerts(rules)}
    problems, tests = [], []
    for name in by_name:
        kinds = {c["fires"] for c in cases.get(name, [])}
        if kinds != {True, False}:
            problems.append(f"{name}: needs a case that fires and one that does not (has {sorted(kinds)})")
    for name, list_ in cases.items():
        if name not in by_name:
            problems.append(f"{cases_path}: {name} is no alert of {rules}")
            continue
        for i, case in enumerate(list_):
            where = f"{name} case {i + 1} ({'fires' if case['fires'] else 'quiet'})"
            t = make_test(by_name[name], case, before, after, float(left_at), observed, problems, where)
            if t:
                tests.append(t)
    # promtool evaluates every rule at every step of a file's
    # evaluation_interval: a case of days is sampled and evaluated hourly,
    # in a file of its own (OUT-1h.yml), so that it costs 50 steps, not 3000.
    import os
    by_interval = {}
    for t in tests:
        by_interval.setdefault(t["interval"], []).append(t)
    for interval, group in by_interval.items():
        path = out if interval == "1m" else f"{os.path.splitext(out)[0]}-{interval}.yml"
        doc_ = {"rule_files": [os.path.abspath(rules)], "evaluation_interval": interval, "tests": group}
        with open(path, "w") as f:
            yaml.safe_dump(doc_, f, sort_keys=False, width=1000)
        print(path)
    return problems


def cmd_doc(rules, doc):
    """docs/observability.md's "Alert rules" table names each alert with its for and severity."""
    rows, on = {}, False
    for line in open(doc, encoding="utf-8"):
        if line.startswith("#"):
            on = line.strip() == "## Alert rules"
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]] if on else []
        if len(cells) == 5 and cells[0].startswith("`Rackgate"):
            rows[cells[0].strip("`")] = (cells[2], cells[3])
    problems = []
    for a in alerts(rules):
        want = (a.get("for", "0m"), a.get("labels", {}).get("severity", ""))
        got = rows.pop(a["alert"], None)
        if got != want:
            problems.append(f"{doc}: {a['alert']} is listed as {got}, the rules say (for, severity) {want}")
    problems += [f"{doc}: lists {name}, which the rules do not have" for name in rows]
    return problems


def main(argv):
    if len(argv) == 6 and argv[0] == "names":
        problems = cmd_names(*argv[1:])
    elif len(argv) == 3 and argv[0] == "doc":
        problems = cmd_doc(*argv[1:])
    elif len(argv) == 8 and argv[0] == "cases":
        problems = cmd_cases(*argv[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(f"# {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
