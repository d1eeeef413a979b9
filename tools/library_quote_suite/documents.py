"""The suite's documents and questions, drawn from fixed pools with a seeded random generator
per set, so every run writes the same text (the files' zip timestamps aside) and asks the same
questions.

    python -m tools.library_quote_suite.documents DIR      # write the folder
    python -m tools.library_quote_suite.documents --jsonl  # rewrite tuning.jsonl and heldout.jsonl

Each set has five files: two policies (numbered clauses), a project brief (deliverables), the
minutes of a meeting (action items) and a price list (an XLSX sheet). The answer's checks are
the source's own words: a quote holds the clause, a list holds every item, table rows hold
every row's code and price.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

SUITE = Path(__file__).resolve().parent
KINDS = ("quote", "list", "table")


@dataclass(frozen=True)
class SetSpec:
    name: str
    org: str
    seed: int
    policies: tuple[str, str]  # topics, keys of TOPICS
    project: str
    committee: str
    formats: dict  # document kind -> file extension


SETS = (
    SetSpec("tuning", "Northwind Logistics", 11, ("travel", "data"), "Kestrel", "Operations Steering Committee",
            {"policy_a": "docx", "policy_b": "html", "brief": "pdf", "minutes": "md", "prices": "xlsx"}),
    SetSpec("heldout", "Harbourline Foods", 23, ("procurement", "remote"), "Marlin", "Quality and Safety Board",
            {"policy_a": "pdf", "policy_b": "txt", "brief": "docx", "minutes": "html", "prices": "xlsx"}),
)

TOPICS = {
    "travel": ("Travel and Expenses Policy", ["travel requests", "expense claims", "hotel bookings", "mileage claims"],
               ["Approval", "Reimbursement"]),
    "data": ("Data Retention Policy", ["customer records", "backup copies", "access logs", "signed contracts"],
             ["Retention", "Disposal"]),
    "procurement": ("Procurement Policy", ["purchase orders", "supplier quotes", "framework contracts", "invoices"],
                    ["Sourcing", "Payment"]),
    "remote": ("Remote Work Policy", ["remote work requests", "equipment loans", "home office claims", "timesheets"],
               ["Eligibility", "Equipment"]),
}
ROLES = ["line manager", "finance controller", "head of department", "data protection officer", "chief operating officer",
         "compliance lead", "HR business partner", "procurement manager"]
CLAUSES = [
    "Employees must submit {noun} within {n} working days of the date on which the cost was incurred.",
    "{Noun} above {amount} EUR require written approval from the {role} before they are committed.",
    "The {role} reviews all {noun} every {period} and records the outcome in the central register.",
    "Exceptions to this clause are granted only by the {role}, in writing, and lapse after {n} calendar days.",
    "Copies of {noun} are kept for {years} years from the end of the financial year and then destroyed securely.",
    "Staff who cannot meet a deadline for {noun} must inform the {role} no later than {n} hours beforehand.",
    "{Noun} that lack a receipt or a reference number are returned to the sender without processing.",
    "The {role} may audit up to {pct} percent of {noun} in any quarter without prior notice.",
    "Where two {noun} concern the same matter, only the later one is valid and the earlier one is withdrawn.",
    "No employee may approve {noun} that benefit themselves, a relative or a company in which they hold shares.",
]
PERIODS = ["month", "quarter", "six months", "year"]
DELIVERABLES = [
    "a route optimisation model for the northern depots", "a dashboard of weekly on-time delivery rates",
    "a training course for the warehouse shift leads", "a risk register reviewed by the steering committee",
    "a data migration plan for the legacy order system", "a supplier scorecard covering cost, quality and delivery",
    "a pilot of electronic proof of delivery in two regions", "a final report with recommendations and costs",
    "a cold-chain temperature monitoring prototype", "an allergen labelling checklist for every product line",
    "a cleaning schedule audit across the three plants", "a recall simulation with the regional distributors",
]
ACTIONS = [
    "circulate the revised budget to all members", "book the external auditor for the spring review",
    "update the incident log with the March figures", "draft a reply to the regulator's letter",
    "confirm the new shift pattern with the union representatives", "send the supplier shortlist to procurement",
    "prepare a one-page summary of the customer complaints", "check the insurance cover for the leased vehicles",
    "arrange a site visit to the Antwerp warehouse", "collect quotes for the replacement conveyor belt",
]
PEOPLE = ["Maria Okafor", "Jonas Lindqvist", "Priya Raman", "Tomasz Nowak", "Aiko Tanaka", "Luis Ortega",
          "Fatima Haddad", "Erik Solberg", "Chen Wei", "Grace Mensah"]
CATEGORIES = {"tuning": ["Pallets", "Packaging", "Transport"], "heldout": ["Ingredients", "Cleaning", "Packaging"]}
ITEMS = {
    "Pallets": ["Euro pallet, new", "Euro pallet, reconditioned", "Plastic pallet, hygienic", "Pallet collar"],
    "Packaging": ["Stretch film roll, 23 micron", "Corrugated box, 40x30x30", "Void fill paper, 500 m", "Tamper tape"],
    "Transport": ["Full truck load, domestic", "Part load per pallet", "Express courier, 10 kg", "Tail-lift surcharge"],
    "Ingredients": ["Wheat flour, type 550", "Rapeseed oil, refined", "Sea salt, fine", "Dried yeast"],
    "Cleaning": ["Alkaline detergent, 20 L", "Food-safe sanitiser, 5 L", "Blue nitrile gloves, box", "Hairnets, pack"],
}
UNITS = {"Pallets": "each", "Packaging": "each", "Transport": "per trip", "Ingredients": "per 25 kg",
         "Cleaning": "each"}


@dataclass(frozen=True)
class Question:
    id: str
    set: str
    kind: str  # quote | list | table
    question: str
    file: str  # the file expected among the sources
    answer_has: list[str]  # the source's own words the answer must hold


def _policy(rng: random.Random, topic: str) -> tuple[str, list[tuple[str, list[tuple[str, str]]]]]:
    """(title, [(section heading, [(clause number, text)])]): two sections of four clauses."""
    title, nouns, headings = TOPICS[topic]
    templates = rng.sample(CLAUSES, 8)
    sections = []
    for s, heading in enumerate(headings):
        clauses = []
        for c in range(4):
            noun = rng.choice(nouns)
            text = templates[s * 4 + c].format(
                noun=noun, Noun=noun[0].upper() + noun[1:], n=rng.choice([3, 5, 10, 14, 30]),
                amount=f"{rng.choice([250, 500, 1500, 5000]):,}", role=rng.choice(ROLES), period=rng.choice(PERIODS),
                years=rng.choice([3, 6, 7, 10]), pct=rng.choice([5, 10, 20]))
            clauses.append((f"{s + 1}.{c + 1}", text))
        sections.append((heading, clauses))
    return title, sections


def _day(rng: random.Random) -> str:
    return (dt.date(2025, 1, 6) + dt.timedelta(days=rng.randrange(0, 300))).strftime("%d %B %Y")


@dataclass(frozen=True)
class Content:
    """One set's documents as data: what the writers put in the files and the questions check."""

    spec: SetSpec
    policies: list  # [(title, sections)]
    deliverables: list[str]
    objective: str
    meeting_day: str
    attendees: list[str]
    actions: list[str]
    prices: list[tuple[str, str, str, str, str]]  # code, category, description, unit, price

    def file(self, kind: str) -> str:
        stem = {"policy_a": _slug(self.policies[0][0]), "policy_b": _slug(self.policies[1][0]),
                "brief": f"brief-{self.spec.project.lower()}", "minutes": f"minutes-{_slug(self.spec.committee)}",
                "prices": "price-list"}[kind]
        return f"{self.spec.name}-{stem}.{self.spec.formats[kind]}"


def _slug(text: str) -> str:
    return "-".join(w.lower() for w in text.replace(",", "").split() if w.lower() not in ("and", "of"))


def content(spec: SetSpec) -> Content:
    rng = random.Random(spec.seed)
    policies = [_policy(rng, t) for t in spec.policies]
    pool = DELIVERABLES[:8] if spec.name == "tuning" else DELIVERABLES[4:]
    deliverables = [f"D{i + 1}. {d[0].upper() + d[1:]}, due {_day(rng)}." for i, d in enumerate(rng.sample(pool, 5))]
    attendees = rng.sample(PEOPLE, 5)
    actions = [f"{rng.choice(attendees)} to {a} by {_day(rng)}." for a in rng.sample(ACTIONS, 4)]
    prices = []
    for c, cat in enumerate(CATEGORIES[spec.name]):
        for i, item in enumerate(ITEMS[cat]):
            prices.append((f"{cat[:3].upper()}-{100 + 10 * c + i}", cat, item, UNITS[cat],
                           f"{rng.randrange(150, 90000) / 100:.2f}"))
    objective = (f"Project {spec.project} is run by {spec.org} to cut delays and waste across the network. "
                 f"It reports to the {spec.committee} each month and closes with a review of its results.")
    return Content(spec, policies, deliverables, objective, _day(rng), attendees, actions, prices)


def questions(spec: SetSpec) -> list[Question]:
    c = content(spec)
    out = []
    picks = [(0, 0, 1), (0, 1, 2), (1, 1, 0)]  # (policy, section, clause)
    for p, s, k in picks:
        title, sections = c.policies[p]
        number, text = sections[s][1][k]
        out.append(Question(f"{spec.name}-quote-{'ab'[p]}{number}", spec.name, "quote",
                            f"Quote clause {number} of the {spec.org} {title} word for word.",
                            c.file("policy_a" if p == 0 else "policy_b"), [text]))
    out.append(Question(f"{spec.name}-list-deliverables", spec.name, "list",
                        f"List the deliverables of project {spec.project} exactly as its brief lists them.",
                        c.file("brief"), [d.split(", due")[0][4:] for d in c.deliverables]))
    out.append(Question(f"{spec.name}-list-actions", spec.name, "list",
                        f"List the action items from the {spec.committee} meeting of {c.meeting_day} as the minutes "
                        "record them.", c.file("minutes"), [a.rstrip(".") for a in c.actions]))
    for cat in CATEGORIES[spec.name][:2]:
        rows = [r for r in c.prices if r[1] == cat]
        out.append(Question(f"{spec.name}-table-{cat.lower()}", spec.name, "table",
                            f"Give the rows of the {spec.org} price list for the {cat} category, with code, "
                            "description, unit and unit price, as the table has them.", c.file("prices"),
                            [x for r in rows for x in (r[0], r[4])]))
    return out


def write_folder(folder: Path) -> list[Path]:
    """Write every set's documents into `folder` (made if missing); the paths written."""
    from .writers import write_document

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in SETS:
        c = content(spec)
        for kind in spec.formats:
            written.append(write_document(folder / c.file(kind), _blocks(c, kind)))
    return written


def _blocks(c: Content, kind: str) -> list[tuple[str, object]]:
    """The document as blocks ("title" | "heading" | "para" | "item" | "table", value) for the writers."""
    spec = c.spec
    if kind.startswith("policy"):
        title, sections = c.policies[0 if kind == "policy_a" else 1]
        blocks: list[tuple[str, object]] = [("title", f"{spec.org}: {title}"),
                                            ("para", f"This policy applies to every employee of {spec.org}. "
                                                     "Clauses are numbered for reference.")]
        for s, (heading, clauses) in enumerate(sections):
            blocks.append(("heading", f"{s + 1}. {heading}"))
            blocks += [("para", f"{n} {text}") for n, text in clauses]
        return blocks
    if kind == "brief":
        return [("title", f"Project {spec.project}: brief"), ("heading", "Objective"), ("para", c.objective),
                ("heading", "Deliverables"), *[("item", d) for d in c.deliverables],
                ("heading", "Budget"), ("para", "The budget is set by the steering committee each quarter.")]
    if kind == "minutes":
        return [("title", f"Minutes of the {spec.committee} meeting, {c.meeting_day}"),
                ("para", "Present: " + ", ".join(c.attendees) + "."),
                ("heading", "Discussion"),
                ("para", "The committee reviewed the quarter's figures and the open risks. No conflicts of interest "
                         "were declared."),
                ("heading", "Action items"), *[("item", a) for a in c.actions]]
    return [("title", f"{spec.org} price list"),
            ("table", [["Code", "Category", "Description", "Unit", "Unit price (EUR)"]] + [list(r) for r in c.prices])]


def write_questions(suite: Path = SUITE) -> None:
    for spec in SETS:
        lines = [json.dumps({k: v for k, v in asdict(q).items() if k != "set"}, ensure_ascii=False)
                 for q in questions(spec)]
        (suite / f"{spec.name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tools.library_quote_suite.documents DIR | --jsonl")
    if sys.argv[1] == "--jsonl":
        write_questions()
    else:
        for path in write_folder(Path(sys.argv[1])):
            print(path)
