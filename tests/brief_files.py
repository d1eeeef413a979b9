"""A folder of short project briefs in five formats (DOCX, XLSX, PDF, HTML, Markdown/text),
each naming a project, its lead and its budget, for the Library's and `tandem ask`'s tests.
Every brief shares the words "project", "lead" and "budget", so only the project's own name
tells them apart."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from document_files import text_pdf

PROJECTS = ["Aurora", "Basilisk", "Cormorant", "Dromedary", "Equinox", "Fennec", "Gannet", "Halcyon", "Ibex",
            "Jacana", "Kestrel", "Lynx", "Marlin", "Nightjar", "Ocelot", "Pangolin", "Quokka", "Raven", "Sable",
            "Tamarin", "Umbra", "Vireo", "Wombat", "Xerus", "Yarrow", "Zephyr", "Albatross", "Bittern", "Caracal",
            "Dunlin", "Egret", "Falcon", "Gecko", "Heron", "Iguana", "Jackal", "Koala", "Lemur", "Magpie", "Narwhal"]
LEADS = ["Maria Okafor", "Jonas Lindqvist", "Priya Raman", "Tomasz Nowak", "Aiko Tanaka", "Luis Ortega",
         "Fatima Haddad", "Erik Solberg", "Chen Wei", "Grace Mensah"]
FORMATS = ("docx", "xlsx", "pdf", "html", "md", "txt")
FILLER = ("This brief summarises the project for the steering committee. The project lead reports monthly; "
          "the budget is reviewed each quarter against milestones and risks.")


@dataclass(frozen=True)
class Brief:
    project: str
    lead: str
    budget: str
    file: str  # its name in the folder


def brief(i: int, fmt: str | None = None) -> Brief:
    project = PROJECTS[i % len(PROJECTS)]
    fmt = fmt or FORMATS[i % 5 if i % 10 != 9 else 5]  # md and txt share the fifth format
    return Brief(project, LEADS[i % len(LEADS)], f"{(i + 3) * 75_000:,} EUR", f"brief-{project.lower()}.{fmt}")


def sentence(b: Brief) -> str:
    return f"Project {b.project} is led by {b.lead}. The budget of project {b.project} is {b.budget}."


def write_brief(folder: Path, b: Brief) -> Path:
    path = folder / b.file
    ext = b.file.rsplit(".", 1)[1]
    if ext == "docx":
        import docx

        d = docx.Document()
        d.add_heading(f"Project {b.project}", 1)
        d.add_paragraph(FILLER)
        d.add_paragraph(sentence(b))
        d.save(path)
    elif ext == "xlsx":
        from openpyxl import Workbook

        wb = Workbook()
        ws = wb.active
        ws.title = "Brief"
        for row in (["Field", "Value"], ["Project", b.project], ["Lead", b.lead], ["Budget", b.budget],
                    ["Note", FILLER]):
            ws.append(row)
        wb.save(path)
    elif ext == "pdf":
        text_pdf(path, [FILLER, sentence(b)])
    elif ext == "html":
        path.write_text(f"<html><body><h1>Project {b.project}</h1><p>{FILLER}</p><p>{sentence(b)}</p></body></html>",
                        encoding="utf-8")
    elif ext == "md":
        path.write_text(f"# Project {b.project}\n\n{FILLER}\n\n## Lead and budget\n\n{sentence(b)}\n", encoding="utf-8")
    else:
        path.write_text(f"PROJECT BRIEF\n{FILLER}\n{sentence(b)}\n", encoding="utf-8")
    return path


def brief_folder(folder: Path, n: int = 40) -> list[Brief]:
    folder.mkdir(parents=True, exist_ok=True)
    briefs = [brief(i) for i in range(n)]
    for b in briefs:
        write_brief(folder, b)
    return briefs
