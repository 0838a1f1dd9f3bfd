"""The mitigation table on the console (rich): candidates ranked, the recommendation, why each skipped one was."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from .mitigation_report import HEADERS, table_rows
from .ranking import recommendation
from .records import MitigationDoc


def mitigation_table(doc: MitigationDoc | dict):
    """The ranked mitigation table (rich); skipped rows say only "skipped" (:func:`print_mitigation` lists why)."""
    doc = MitigationDoc.of(doc)
    sim = " [simulated host]" if doc.simulated else ""
    t = Table(title=f"Mitigation of {doc.profile} on {doc.host}{sim} — loop-free candidates ranked by "
                    f"speed over the baseline (non-looping samples; [95% CI]; =#1: not distinguishable from #1)",
              title_justify="left")
    for h in HEADERS:
        t.add_column(h, overflow="fold", no_wrap=h in ("rank", "candidate", "tok/s", "vs base", "verdict"))
    for row in table_rows(doc):
        style = ("cyan" if row[-1].startswith("baseline") else "green" if row[0] else
                 "red" if "corrupts" in row[-1] else None)
        t.add_row(*row[:-1], row[-1].split(":")[0] if row[-1].startswith(("skipped", "pending", "not-comparable"))
                  else row[-1],
                  style=style)
    return t


def print_mitigation(console, doc: MitigationDoc | dict) -> None:
    """The table, then one line per skipped candidate with the reason."""
    doc = MitigationDoc.of(doc)
    console.print(mitigation_table(doc))
    console.print(escape(recommendation(doc)).replace("**", ""))
    for r in doc.with_status("skipped", "not-comparable"):
        console.print(f"[dim]{r.status}[/] {r.name} ({escape(r.change)}): {escape(r.evidence)}")
