"""Runs every shipped query (queries/*.rq) in rdflib's own SPARQL engine over the test
fixture and checks it gives the rows forktrail gives (tests/data/queries/*.tsv, which
tests/it/queries.rs checks against forktrail): the same numbers on another engine.

rdflib's default graph here is the union of the named graphs as a set (an RDF merge),
while Oxigraph's union keeps one copy of a triple per graph that holds it, so a query
that joins through the agent declarations every session graph repeats would count
differently on the two. Usage: cross_engine.py QUERIES_DIR DATA_DIR"""
import io
import sys
from collections import Counter
from pathlib import Path

import rdflib
from rdflib.plugins.sparql.results.tsvresults import TSVResultParser

queries, data = Path(sys.argv[1]), Path(sys.argv[2])
dataset = rdflib.Dataset(default_union=True)
dataset.parse(data / "fixture.trig", format="trig")


def bindings(name):
    """The .bind file of a query, read as forktrail's tests read it."""
    out = {}
    path = data / "queries" / (name + ".bind")
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, value = line.split("=", 1)
        if value.startswith("<"):
            out[key] = rdflib.URIRef(value.strip("<>"))
        elif value.lstrip("-").isdigit():
            out[key] = rdflib.Literal(int(value))
        else:
            out[key] = rdflib.Literal(value)
    return out


def plain(term):
    """A comparable value: the same date-time or integer written two ways is one."""
    if term is None:
        return None
    if isinstance(term, rdflib.Literal):
        value = term.toPython()
        return ("literal", value if not isinstance(value, rdflib.Literal) else str(value))
    return (type(term).__name__, str(term))


failures = []
checked = 0
for rq in sorted(queries.glob("*.rq")):
    name = rq.stem
    expected_path = data / "queries" / (name + ".tsv")
    expected = TSVResultParser().parse(io.StringIO(expected_path.read_text()))
    variables = [str(v) for v in expected.vars]
    want = Counter(tuple(plain(row.get(rdflib.Variable(v))) for v in variables)
                   for row in expected.bindings)
    result = dataset.query(rq.read_text(), initBindings=bindings(name))
    got = Counter(tuple(plain(row[v]) for v in variables) for row in result)
    checked += 1
    if got != want:
        failures.append("%s: rdflib gives %d rows, forktrail %d\n  only rdflib: %s\n  only forktrail: %s"
                        % (name, sum(got.values()), sum(want.values()),
                           list((got - want).items())[:3], list((want - got).items())[:3]))
    else:
        n = sum(want.values())
        print("%s: %d %s agree" % (name, n, "row" if n == 1 else "rows"))

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("all %d shipped queries agree" % checked)
