"""Reads a `forktrail export --format prov` file with the `prov` library (a PROV tool
forktrail did not write, which does no inference) and prints what it found as JSON:
entities (and how many are turns), agents, activities, attributions, derivations,
generations, associations and usages. Usage: prov_check.py FILE"""
import json
import sys

import prov
import prov.model as pm

document = prov.read(sys.argv[1], format="rdf", rdf_format="turtle")
records = list(document.get_records())


def of(kind):
    return [r for r in records if isinstance(r, kind)]


def ident(record):
    return str(record.identifier.uri) if record.identifier is not None else ""


entities = of(pm.ProvEntity)
print(json.dumps({
    "entities": len(entities),
    "turns": sum(1 for e in entities if "/turn/" in ident(e)),
    "sessions": sum(1 for e in entities if ident(e).count("/") == 0 and ":session:" in ident(e)),
    "agents": len(of(pm.ProvAgent)),
    "models": sum(1 for a in of(pm.ProvAgent) if ":agent:model/" in ident(a)),
    "activities": len(of(pm.ProvActivity)),
    "attributions": len(of(pm.ProvAttribution)),
    "derivations": len(of(pm.ProvDerivation)),
    "generations": len(of(pm.ProvGeneration)),
    "associations": len(of(pm.ProvAssociation)),
    "usages": len(of(pm.ProvUsage)),
}, sort_keys=True))
