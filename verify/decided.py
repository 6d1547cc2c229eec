"""What the current confirmatory run decided, one line per truth: the first screen of the
main job (``python -m verify.rates`` opens with one line per truth of its own run, and
beside it this decision on the same truth class).

The decision is derived, not typed: :data:`RECORDS` are the shipped records of the current
confirmatory run's ASVI sweeps (``figures/reference/``, each read with its budget control
beside it, decided under the protocol they were written under), and
``verify/protocols/CURRENT.decided.json`` holds, per truth, the d^2 verdicts that
``verify.reading.analysis`` gives on them: the theorem test and the attainment test with their
replication shares, the budget control's state and the n range.  ``python -m
verify.decided`` rewrites the file from the records; a test holds the file equal to its
regeneration, so it cannot drift from the records.  A truth of a run is matched to the
decision by its class -- kind, p and (Hoelder) alpha; the truth seed differs by design.
Only ASVI's own entries (the random start, or the constructive start where it is the
only run) appear; the known-answer controls' verdicts are in docs/results/confirm-v4.md.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from dataclasses import asdict, dataclass

from simulate.sweep.setup.kinds import ASVI
from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.paths import read_text_bounded, write_atomic
from verify.reading.analysis import analyse
from verify.reading.controls import read_with_control
from verify.report.findings import SCREEN_WIDTH, equivalence_words

__all__ = [
    "CURRENT", "RECORDS", "SMOKE_TIERS", "WIDTH", "Decided", "decided_of", "decision_block",
    "load", "main", "opening_line", "wrapped",
]  # fmt: skip

CURRENT = "confirm-v4"  # RESULTS.md's current decision (its opening section)
RECORDS = tuple(
    f"figures/reference/records-confirm4-{name}.jsonl.gz"
    for name in (
        "holder-a15", "teacher-p20", "holder-a05", "holder-a125p2", "teacher-p10",
        "teacher-p200",
    )
)  # fmt: skip
PATH = os.path.join(os.path.dirname(__file__), "protocols", f"{CURRENT}.decided.json")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout (RECORDS)


@dataclass(frozen=True)
class Decided:
    """One truth's d^2 decision: its class (``kind``, ``p``, ``alpha``), the n range,
    each test's verdict with the share of bootstrap resamples giving it (None where not
    resampled; the attainment fields None for a truth with no reference) and the budget
    control's state (None: no control)."""

    truth: str
    kind: str
    p: int
    alpha: float | None
    n_lo: int
    n_hi: int
    theorem: str
    theorem_share: float | None
    attainment: str | None
    attainment_share: float | None
    budget: str | None
    # the reading the theorem verdict is (verify.stats.readings: "sharp" or "corollary-6.4"), the
    # proved bound's verdict beside it and delta_flip / delta_pass (None: decided without)
    reading: str | None = None
    other_verdict: str | None = None
    delta_flip: float | None = None
    delta_pass: float | None = None
    # the log-factor-or-power test's verdict (verify.stats.logfactor: "power", "log", "steeper")
    # and its change of the local slope with the interval (None: not tested)
    log_or_power: str | None = None
    change: tuple[float, float, float] | None = None

    @property
    def cls(self) -> tuple:
        return (self.kind, self.p, self.alpha if self.kind == "holder" else None)

    def words(self) -> str:
        """``theorem PASS (100%), attainment FAIL (100%), budget converged``."""

        def v(verdict, share):
            return verdict + ("" if share is None else f" ({share:.0%})")

        out = [f"theorem {v(self.theorem, self.theorem_share)}"]
        if self.reading is not None:
            proved = "" if self.reading != "sharp" else f" proved bound {self.other_verdict};"
            out[0] += (
                f" [{_READING_NAMES[self.reading]};{proved} FAIL below delta"
                f" {self.delta_flip:.2f}; PASS from {self.delta_pass:.2f}]"
            )
        if self.attainment is not None:
            out.append(f"attainment {v(self.attainment, self.attainment_share)}")
        if self.budget is not None:
            out.append(f"budget {self.budget}")
        if self.log_or_power is not None:
            d, lo, hi = self.change
            out.append(f"{_LOP_WORDS[self.log_or_power]} ({d:+.3f} [{lo:+.3f}, {hi:+.3f}])")
        return ", ".join(out)


# the log-factor-or-power verdicts on the first screen (verify.stats.logfactor)
_LOP_WORDS = {
    "power": "flattening a power",
    "log": "curvature not shown beyond log factors",
    "steeper": "steepening beyond the log factors",
}


def decided_of(results, every_estimator: bool = False) -> list[Decided]:
    """One :class:`Decided` per truth of ``verify.reading.analysis`` results (ASVI's d^2 entry;
    with ``every_estimator`` each estimator's d^2 entry but an arm's)."""
    return [d for _, d in _decided_entries(results, every_estimator)]


def _decided_entries(results, every_estimator: bool = False) -> list[tuple]:
    """``(result, Decided)`` of :func:`decided_of`'s entries."""
    out = []
    for r in results:
        if r.metric != "d2" or r.role == "arm":
            continue
        if not (every_estimator or ASVI.is_primary(r.estimator)):
            continue
        a, t = r.attainment, r.theorem
        out.append((r,
            Decided(
                truth=r.truth, kind=r.kind, p=r.p, alpha=r.alpha,
                n_lo=int(r.curve.ns[0]), n_hi=int(r.curve.ns[-1]),
                theorem=str(t.verdict),
                theorem_share=None if t.replication is None else t.replication.share,
                attainment=None if a is None else str(a.verdict),
                attainment_share=None if a is None or a.replication is None
                else a.replication.share,
                budget=None if r.control is None else r.control.state,
                **_reading_fields(t.readings),
                **_log_or_power_fields(r.log_or_power),
            )
        ))  # fmt: skip
    return out


# the reading a theorem verdict is (verify.stats.readings): the sharp reading of Corollary 6.1, or
# the teacher's Corollary 6.4 expression (its sharp reading and its proved bound at once)
_READING_NAMES = {"sharp": "the sharp reading", "corollary-6.4": "Corollary 6.4's expression"}


def _reading_fields(g) -> dict:
    """:class:`Decided`'s reading fields of a theorem test's readings (none where None):
    the reading the verdict is, the proved bound's verdict beside it, delta_flip and
    delta_pass."""
    if g is None:
        return {}
    other = "not available" if g.proved_log_power is None else g.proved_verdict
    return {
        "reading": "sharp" if g.claim.startswith("Corollary 6.1") else "corollary-6.4",
        "other_verdict": str(other),
        "delta_flip": round(float(g.delta_flip), 4),
        "delta_pass": round(float(g.delta_pass), 4),
    }


def _log_or_power_fields(lp) -> dict:
    """:class:`Decided`'s log-factor-or-power fields (none where not tested)."""
    if lp is None:
        return {}
    return {
        "log_or_power": lp.verdict,
        "change": tuple(round(float(x), 4) for x in (lp.change, *lp.change_ci)),
    }


def load(path: str = PATH) -> list[Decided]:
    """The shipped decision (:data:`PATH`); empty where the file is absent."""
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return [Decided(**{**d, **({"change": tuple(d["change"])} if d.get("change") else {})})
            for d in doc["truths"]]  # fmt: skip


def _range(d: Decided) -> str:
    return f"n = {d.n_lo}..{d.n_hi}"


# the first screen's width (characters): every line of the decision block fits it
WIDTH = SCREEN_WIDTH


def wrapped(text: str, indent: str = "") -> list[str]:
    """``text`` as lines of at most :data:`WIDTH` characters, the first at ``indent``, the
    rest two spaces further in."""
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False)  # fmt: skip


def decision_block(results, opening: str, closing: str, current=None) -> list[str]:
    """The main job's first and last screen: ``opening`` (what the run is: its tier, smoke
    test, exploratory or confirmatory, and where the confirmatory evidence is), then per
    truth and estimator of ``results`` one plain sentence -- what its d^2 tests decided, at
    which n, under which protocol -- and, for ASVI, :data:`CURRENT`'s decision on the same
    truth class under it (or that it has none), then ``closing`` (the exit status); every
    line at most :data:`WIDTH` characters."""
    current = load() if current is None else current
    theirs = {d.cls: d for d in current}
    lines = wrapped(opening)
    for r, d in _decided_entries(results, every_estimator=True):
        proto = r.decision.protocol.partition("@")[0]
        who = "" if ASVI.is_primary(r.estimator) else f"{r.estimator}, "
        eq = r.theorem.equivalence
        also = "" if eq is None else f"; {equivalence_words(eq)}"
        lines += wrapped(f"{d.truth} ({who}{_range(d)}, protocol {proto}): {d.words()}{also}.")
        if ASVI.is_primary(r.estimator):
            other = theirs.get(d.cls)
            beside = (f"decided on this class ({_range(other)}): {other.words()}." if other
                      else "has no truth of this class.")  # fmt: skip
            lines += wrapped(f"{CURRENT} {beside}", "  ")
    head, sep, words = closing.partition(": ")  # the status's words kept on one line
    if len(closing) <= WIDTH or not sep:
        return lines + wrapped(closing)
    return lines + [head + ":"] + wrapped(words, "  ")


def derive(records=RECORDS) -> list[Decided]:
    """:class:`Decided` of each records file (with its control beside it), in order."""
    out = []
    for rel in records:
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            raise ValueError(f"no records file {path} (a checkout of the repository has them)")
        recs, ctrl = read_with_control(path, "a shipped record set")
        out += decided_of(analyse(recs, control=ctrl))
    return out


def document(decided: list[Decided]) -> dict:
    return {
        "protocol": CURRENT,
        "note": "generated by `python -m verify.decided` from the records named; do not edit",
        "records": list(RECORDS),
        "truths": [asdict(d) for d in decided],
    }


def main(argv=None) -> int:
    ap = Parser(
        prog="python -m verify.decided",
        description=f"Rewrite verify/protocols/{CURRENT}.decided.json (what {CURRENT}"
        " decided, per truth) from its shipped records; --check: exit 1 if the file differs"
        " from its regeneration.",
    )
    ap.add_argument("--check", action="store_true", help="compare, do not write")
    args = ap.parse_args(argv)
    try:
        decided = derive()
    except ValueError as exc:
        print_error(exc)
        return 2
    text = file_text(decided)
    if args.check:
        same = os.path.isfile(PATH) and read_text_bounded(PATH, "the decided file") == text
        print(f"{PATH}: {'equal to' if same else 'DIFFERS from'} its regeneration")
        return 0 if same else 1
    write_atomic(PATH, text)
    print(f"wrote {PATH}: {len(decided)} truths")
    return 0


def file_text(decided: list[Decided]) -> str:
    """The file :data:`PATH` holds for ``decided`` (sorted keys, one space indents)."""
    return json.dumps(document(decided), indent=1, sort_keys=True) + "\n"


# the tiers that are smoke tests of the pipeline (seconds to minutes), not evidence
SMOKE_TIERS = ("tiny", "quick")


def opening_line(args, results, proto) -> str:
    """What this run is, the decision block's first sentence: re-read records, a smoke
    test, an exploratory or a confirmatory tier, and where the confirmatory evidence is."""
    ns = [n for r in results for n in r.curve.ns]
    upto = f"n <= {max(ns):,}" if ns else "no n"
    evidence = f"the confirmatory evidence is {CURRENT} (RESULTS.md), beside each truth below"
    if args.records:
        return (f"Records {os.path.basename(args.records)} ({upto}), decided under protocol"
                f" {proto.tag} ({proto.kind}); {evidence}.")  # fmt: skip
    if proto.kind == "confirmatory":
        return (f"Tier {args.tier}: confirmatory, pre-registered as protocol {proto.tag}"
                f" ({upto}).")  # fmt: skip
    if args.tier in SMOKE_TIERS:
        return f"Tier {args.tier}: a smoke test ({upto}), not evidence; {evidence}."
    return f"Tier {args.tier}: exploratory ({upto}, protocol {proto.tag}); {evidence}."


if __name__ == "__main__":
    sys.exit(run_main(main))
