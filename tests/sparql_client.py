"""Drives a forktrail endpoint with SPARQLWrapper (and rdflib for CONSTRUCT results),
a SPARQL client forktrail did not write. Usage: sparql_client.py ENDPOINT LEAF ROOT"""
import json
import sys

from SPARQLWrapper import JSON, TURTLE, SPARQLWrapper

endpoint, leaf, root = sys.argv[1:4]
# The protocol has no bindings: the id goes in as an escaped string literal.
leaf_literal = json.dumps(leaf)
FT = "PREFIX ft: <https://w3id.org/forktrail/ns#>\n"

client = SPARQLWrapper(endpoint)
client.setReturnFormat(JSON)
client.setQuery(FT + """SELECT ?levelId ?depth WHERE {
  ?s ft:sessionId %s ; ft:parentSession* ?level .
  ?level ft:sessionId ?levelId ; ft:forkDepth ?depth } ORDER BY ?depth""" % leaf_literal)
rows = client.query().convert()["results"]["bindings"]
assert rows[0]["levelId"]["value"] == root, rows
assert rows[-1]["levelId"]["value"] == leaf, rows
print("select: %d levels, root first" % len(rows))

client.setQuery(FT + "ASK { ?s ft:sessionId %s ; ft:parentSession ?p }" % leaf_literal)
print("ask: %s" % client.query().convert()["boolean"])

client.setReturnFormat(TURTLE)
client.setQuery(FT + "CONSTRUCT { ?f a ft:Fork } WHERE { ?f a ft:Fork }")
graph = client.queryAndConvert()
if isinstance(graph, bytes):  # older SPARQLWrapper: parse it ourselves
    import rdflib
    graph = rdflib.Graph().parse(data=graph, format="turtle")
print("construct: %d forks" % len(graph))

# What SPARQLWrapper asks for when not told a format: RDF/XML for CONSTRUCT and DESCRIBE.
client = SPARQLWrapper(endpoint)
client.setQuery(FT + "CONSTRUCT { ?f a ft:Fork } WHERE { ?f a ft:Fork }")
graph = client.queryAndConvert()
print("default construct: %d forks" % len(graph))
client.setQuery("DESCRIBE <urn:forktrail:agent:alice>")
print("default describe: %d triples" % len(client.queryAndConvert()))

# rdflib's SPARQLStore, with its defaults.
import rdflib
from rdflib.plugins.stores.sparqlstore import SPARQLStore

store = rdflib.Graph(store=SPARQLStore(endpoint))
forks = store.query(FT + "CONSTRUCT { ?f a ft:Fork } WHERE { ?f a ft:Fork }")
print("sparqlstore construct: %d forks" % len(forks.graph))
print("sparqlstore ask: %s" % store.query(FT + "ASK { ?s ft:sessionId %s }" % leaf_literal).askAnswer)

# An ASK asked for as CSV, which defines no booleans: refused rather than misread.
from SPARQLWrapper import CSV
from SPARQLWrapper.SPARQLExceptions import SPARQLWrapperException
from urllib.error import HTTPError

client = SPARQLWrapper(endpoint)
client.setReturnFormat(CSV)
client.setQuery(FT + "ASK { ?s ft:sessionId %s }" % leaf_literal)
try:
    answer = client.query().convert()
    print("csv ask answered: %r" % answer)
except (HTTPError, SPARQLWrapperException) as e:
    print("csv ask refused: %s" % getattr(e, "code", type(e).__name__))
