//! Export and import: lossless round trips, and imports refused whole when they would
//! break the model.

use crate::common;

use common::*;
use forktrail::{demo, Error, ExportFormat, ImportFormat, Store};

fn export_all(s: &Store, format: ExportFormat) -> Vec<u8> {
    let mut out = Vec::new();
    s.export(None, format, &mut out).unwrap();
    out
}

#[test]
fn trig_and_nquads_round_trips_keep_replays_digests_and_quads() {
    for (export, import) in [
        (ExportFormat::TriG, ImportFormat::TriG),
        (ExportFormat::NQuads, ImportFormat::NQuads),
    ] {
        let source = Store::in_memory().unwrap();
        demo::build(&source).unwrap();
        let target = Store::in_memory().unwrap();
        let ids = target
            .import(export_all(&source, export).as_slice(), import)
            .unwrap();
        assert_eq!(ids.len(), 4);
        assert_eq!(quads(&source), quads(&target));
        for info in source.list().unwrap() {
            let id = sid(&info.session);
            assert_eq!(
                source.load(&id, None).unwrap(),
                target.load(&id, None).unwrap()
            );
            assert_eq!(
                Some(info),
                target
                    .list()
                    .unwrap()
                    .into_iter()
                    .find(|i| i.session == id.as_str())
            );
        }
    }
}

fn trig(body: &str) -> String {
    format!(
        "@prefix ft: <https://w3id.org/forktrail/ns#> .\n\
         @prefix dcterms: <http://purl.org/dc/terms/> .\n{body}"
    )
}

fn session_graph(id: &str, declared_id: &str, branch: &str, parent: Option<(&str, u64)>) -> String {
    let lineage = parent.map_or(String::new(), |(p, k)| {
        format!("ft:parentSession <urn:forktrail:session:{p}> ; ft:forkedAtIndex {k} ;")
    });
    format!(
        "<urn:forktrail:session:{id}> {{ <urn:forktrail:session:{id}> a ft:Session ; \
         ft:sessionId \"{declared_id}\" ; ft:branch \"{branch}\" ; ft:forkDepth 0 ; {lineage} \
         dcterms:created \"2026-01-01T00:00:00Z\"^^<http://www.w3.org/2001/XMLSchema#dateTime> . }}\n"
    )
}

/// Whether an error is the one a case expects.
type IsExpected = fn(&Error) -> bool;

#[test]
fn imports_that_would_break_the_model_are_refused_whole() {
    let s = Store::in_memory().unwrap();
    let a = session_with(&s, "a", 2);
    fork_at(&s, &a, 1, "b", "taken");
    let cases: Vec<(String, IsExpected)> = vec![
        // a cycle between two new sessions
        (
            session_graph("x", "x", "main", Some(("y", 0)))
                + &session_graph("y", "y", "l", Some(("x", 0))),
            |e| matches!(e, Error::CycleDetected { .. }),
        ),
        // a fork whose parent exists nowhere
        (session_graph("x", "x", "l", Some(("nowhere", 0))), |e| {
            matches!(e, Error::ParentMissing { .. })
        }),
        // an id that does not match its graph
        (session_graph("x", "other", "main", None), |e| {
            matches!(e, Error::InvalidInput(_))
        }),
        // a label already used by a sibling in the store
        (session_graph("x", "x", "taken", Some(("a", 1))), |e| {
            matches!(e, Error::DuplicateLabel { .. })
        }),
        // a fork point past the parent's end
        (session_graph("x", "x", "late", Some(("a", 3))), |e| {
            matches!(e, Error::IndexOutOfRange { .. })
        }),
        // an invalid label
        (session_graph("x", "x", "bad label", None), |e| {
            matches!(e, Error::InvalidName { .. })
        }),
        // a session that already exists
        (session_graph("a", "a", "main", None), |e| {
            matches!(e, Error::Conflict(_))
        }),
        // a graph that is not a session
        (
            "<urn:elsewhere> { <urn:s> <urn:p> <urn:o> . }\n".into(),
            |e| matches!(e, Error::InvalidInput(_)),
        ),
        // a triple outside any graph
        ("<urn:s> <urn:p> <urn:o> .\n".into(), |e| {
            matches!(e, Error::InvalidInput(_))
        }),
        // not TriG at all
        ("<urn:s> { oops".into(), |e| {
            matches!(e, Error::Parse { .. })
        }),
    ];
    for (body, expected) in cases {
        let text = trig(&body);
        let err = fails_unchanged(&s, || s.import(text.as_bytes(), ImportFormat::TriG));
        assert!(expected(&err), "{err}\nfor\n{text}");
    }
    // The same shapes are accepted when they are valid.
    let ok = trig(&session_graph("x", "x", "fresh", Some(("a", 2))));
    assert_eq!(s.import(ok.as_bytes(), ImportFormat::TriG).unwrap(), ["x"]);
    assert_eq!(s.replay(&sid("x"), None).unwrap().len(), 2);
}

#[test]
fn formats_are_told_from_the_content_even_past_the_sniffing_window() {
    use forktrail::ImportFormat;
    let long = "x".repeat(2 << 20);
    let cases: [(String, Option<ImportFormat>); 5] = [
        (
            format!("<urn:s> <urn:p> \"{long}\" <urn:g> .\n"),
            Some(ImportFormat::NQuads),
        ),
        (
            format!("<urn:g> {{ <urn:s> <urn:p> \"{long}\" . }}\n"),
            Some(ImportFormat::TriG),
        ),
        (
            format!("{{\"type\":\"user\",\"uuid\":\"u\",\"sessionId\":\"s\",\"message\":{{\"role\":\"user\",\"content\":\"{long}\"}}}}\n"),
            Some(ImportFormat::ClaudeCode),
        ),
        (
            format!("<urn:s> <urn:p> <urn:o> <urn:g> .\n<urn:s> <urn:p> \"{long}\" <urn:g> .\n"),
            Some(ImportFormat::NQuads),
        ),
        (format!("Dear diary, {long}"), None),
    ];
    for (content, expected) in cases {
        assert_eq!(
            ImportFormat::sniff(content.as_bytes()),
            expected,
            "{}",
            &content[..40]
        );
    }
}
