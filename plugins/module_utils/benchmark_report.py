# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The training benchmark's fleet report: a Markdown table and a plot, from a judgement.

``judgement`` is what benchmark_judge.judge returns. render_markdown and render_svg are pure
(text out); render_png draws the same plot with matplotlib when the controller has it
(``png_available``), which the caller checks first. The plot shows samples/s per node, one
panel per benchmark, nodes grouped by profile, each group with its floor (dashed) and its
median in this run (dotted); a node without a number is drawn as an empty slot marked "n/a".
"""


from xml.sax.saxutils import escape

STATUS_MARK = {"pass": "ok", "warn": "WARN", "fail": "FAIL"}
BAR_COLORS = {"pass": "#4c78a8", "outlier": "#f58518", "below_floor": "#e45756", "missing": "#bbbbbb"}


def _fmt(value, digits=1):
    """A number for the table: DIGITS decimals from 10 up, three significant digits below (a CPU run's 0.05)."""
    if value is None:
        return "-"
    return ("%.*f" % (digits, value)) if abs(value) >= 10 or digits == 0 else ("%.3g" % value)


def ordered_nodes(judgement):
    """The judged nodes sorted by profile, then node name."""
    return sorted(judgement["nodes"], key=lambda n: (n["profile"], n["node"]))


def render_markdown(judgement, title="Training benchmark"):
    """The fleet table: node, profile, per benchmark samples/s, floor, profile median; findings."""
    benches = judgement["benchmarks"]
    head = ["node", "profile"]
    for bench in benches:
        head += ["%s samples/s" % bench, "floor", "profile median"]
    head.append("verdict")
    lines = ["# %s" % title, ""]
    summary = judgement["summary"]
    lines.append("%d nodes: %d pass, %d warn, %d fail. Slow sibling: more than %g %% below the profile's "
                 "median in this run (judged with %d or more results per profile)%s."
                 % (len(judgement["nodes"]), summary["pass"], summary["warn"], summary["fail"],
                    judgement["outlier_pct"], judgement["outlier_min_nodes"],
                    ", fails the node" if judgement["outlier_fails"] else ", a warning"))
    if judgement.get("run_id"):
        lines.append("Run: %s." % judgement["run_id"])
    lines += ["", "| " + " | ".join(head) + " |", "|" + "|".join(["---", "---"] + ["---:"] * (3 * len(benches)) + ["---"]) + "|"]
    for node in ordered_nodes(judgement):
        row = [node["node"], node["profile"]]
        for bench in benches:
            res = node["results"][bench]
            value = _fmt(res["samples_per_s"])
            if res["status"] in ("below_floor", "outlier"):
                value = "**%s** (%s)" % (value, res["status"].replace("_", " "))
            row += [value, _fmt(res["floor"]), _fmt(res["median"])]
        row.append(STATUS_MARK[node["status"]])
        lines.append("| " + " | ".join(row) + " |")
    findings = [(n["node"], f) for n in ordered_nodes(judgement) for f in n["findings"]]
    lines += ["", "## Findings", ""]
    if findings:
        for node, finding in findings:
            lines.append("- %s: %s (%s)" % (node, finding["message"].replace("\n", " "), finding["kind"]))
    else:
        lines.append("None.")
    lines += ["", "## Floors", ""]
    for profile in sorted(judgement["profiles"]):
        for bench in benches:
            stats = judgement["profiles"][profile][bench]
            lines.append("- %s / %s: floor %s samples/s (node); %s" % (
                profile, bench, _fmt(stats["floor"]), stats["source"] or "no source given"))
    return "\n".join(lines) + "\n"


def _layout(judgement):
    """Profiles in order with their nodes: [(profile, [node, ...])]."""
    groups = []
    for node in ordered_nodes(judgement):
        if not groups or groups[-1][0] != node["profile"]:
            groups.append((node["profile"], []))
        groups[-1][1].append(node)
    return groups


def render_svg(judgement, title="Training benchmark: samples/s per node"):
    """The plot as a standalone SVG document (text), one panel per benchmark."""
    groups = _layout(judgement)
    count = sum(len(members) for _profile, members in groups)
    slot, gap, left, panel_h, top = 28, 18, 70, 220, 40
    width = left + count * slot + max(0, len(groups) - 1) * gap + 30
    height = top + len(judgement["benchmarks"]) * (panel_h + 90) + 10
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="11">' % (width, height, width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">%s</text>' % (left, escape(title))]
    for index, bench in enumerate(judgement["benchmarks"]):
        y0 = top + index * (panel_h + 90)
        base = y0 + panel_h
        numbers = [n["results"][bench][k] for _p, members in groups for n in members
                   for k in ("samples_per_s", "floor", "median") if n["results"][bench][k] is not None]
        top_value = max(numbers) * 1.1 if numbers else 1.0
        out.append('<text x="%d" y="%d" font-size="12">%s (samples/s)</text>' % (left, y0 + 12, escape(bench)))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, base, width - 20, base))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, y0 + 20, left, base))
        for frac in (0.0, 0.5, 1.0):
            value = top_value / 1.1 * frac
            y = base - (panel_h - 20) * value / top_value
            out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 4, y + 4, _fmt(value, 0)))

        def scale(value, y_base=base, ceiling=top_value):
            return y_base - (panel_h - 20) * value / ceiling
        x = left + 4
        for profile, members in groups:
            x_start = x
            for node in members:
                res = node["results"][bench]
                if res["samples_per_s"] is None:
                    out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#888">n/a</text>'
                               % (x + slot / 2.0, base - 4))
                else:
                    y = scale(res["samples_per_s"])
                    out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s %s %.1f</title></rect>'
                               % (x + 3, y, slot - 6, base - y, BAR_COLORS.get(res["status"], "#4c78a8"),
                                  escape(node["node"]), escape(bench), res["samples_per_s"]))
                out.append('<text transform="translate(%.1f,%d) rotate(45)">%s</text>'
                           % (x + slot / 2.0, base + 10, escape(node["node"])))
                x += slot
            stats = judgement["profiles"][profile][bench]
            for key, dash, color in (("floor", "6,3", "#e45756"), ("median", "2,2", "#333333")):
                if stats[key] is not None:
                    y = scale(stats[key])
                    out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="%s">'
                               '<title>%s %s %.1f</title></line>'
                               % (x_start, y, x, y, color, dash, escape(profile), key, stats[key]))
            out.append('<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">%s</text>'
                       % ((x_start + x) / 2.0, base + 75, escape(profile)))
            x += gap
    out.append('<text x="%d" y="%d" fill="#555">bars: samples/s (orange: slow sibling, red: below floor); '
               'dashed red: floor; dotted: profile median in this run</text>' % (left, height - 4))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def png_available():
    """Whether matplotlib can be imported on this controller."""
    try:
        import matplotlib  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return False
    return True


def render_png(judgement, title="Training benchmark: samples/s per node"):
    """The plot drawn with matplotlib (Agg) as PNG bytes (no timestamp: the same judgement, the same bytes)."""
    import io  # pylint: disable=import-outside-toplevel
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    groups = _layout(judgement)
    benches = judgement["benchmarks"]
    count = sum(len(members) for _p, members in groups)
    fig, axes = plt.subplots(len(benches), 1, figsize=(max(6.0, 0.45 * count + 2.5), 3.6 * len(benches)),
                             squeeze=False)
    for axis, bench in zip(axes[:, 0], benches):
        x, ticks, labels = 0.0, [], []
        for profile, members in groups:
            x_start = x
            for node in members:
                res = node["results"][bench]
                if res["samples_per_s"] is None:
                    axis.text(x, 0, "n/a", ha="center", va="bottom", color="#888888", fontsize=8)
                else:
                    axis.bar(x, res["samples_per_s"], width=0.7, color=BAR_COLORS.get(res["status"], "#4c78a8"))
                ticks.append(x)
                labels.append(node["node"])
                x += 1
            stats = judgement["profiles"][profile][bench]
            if stats["floor"] is not None:
                axis.hlines(stats["floor"], x_start - 0.4, x - 0.6, colors="#e45756", linestyles="dashed")
            if stats["median"] is not None:
                axis.hlines(stats["median"], x_start - 0.4, x - 0.6, colors="#333333", linestyles="dotted")
            axis.text((x_start + x - 1) / 2.0, 1.01, profile, transform=axis.get_xaxis_transform(),
                      ha="center", va="bottom", fontweight="bold", fontsize=9)
            x += 0.8
        axis.set_xlim(-0.6, max(x - 0.2, 3.4))
        axis.set_xticks(ticks)
        axis.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
        axis.set_ylabel("samples/s")
        axis.set_title(bench, fontsize=10, loc="left", pad=14)
    fig.suptitle(title + "\n(dashed red: floor; dotted: profile median in this run)", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
