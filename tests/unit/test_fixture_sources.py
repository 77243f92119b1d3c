"""Every captured fixture says where it came from (tests/fixtures/README.md).

A file under tests/fixtures/ is covered by the first of these that exists:
``<file>.source`` (e.g. ``x.txt.source``), ``<stem>.source`` (``x.source`` beside ``x.txt`` or
``x.txt.gz``), ``<prefix>.source`` for a group of files named ``<prefix>-*`` (one capture session),
``<folder>/README.source``, or ``<folder>.source`` beside a folder that holds it, at any depth.
"""
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _covered(path):
    if path.with_name(path.name + ".source").is_file():
        return True
    stem = path.name
    while "." in stem:
        stem = stem.rsplit(".", 1)[0]
        if (path.parent / (stem + ".source")).is_file():
            return True
    parts = stem.split("-")
    if any((path.parent / ("-".join(parts[:n]) + ".source")).is_file() for n in range(1, len(parts))):
        return True
    for folder in path.parents:
        if folder == FIXTURES.parent:
            break
        if (folder / "README.source").is_file() or folder.with_name(folder.name + ".source").is_file():
            return True
    return False


def fixture_files():
    return sorted(p for p in FIXTURES.rglob("*")
                  if p.is_file() and p.suffix != ".source" and p.name != "README.md")


def test_there_are_fixtures():
    assert len(fixture_files()) > 100


def test_every_fixture_names_its_source():
    missing = [str(p.relative_to(FIXTURES)) for p in fixture_files() if not _covered(p)]
    assert missing == []


def test_every_source_file_says_something():
    empty = [str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.source") if len(p.read_text().strip()) < 40]
    assert empty == []
