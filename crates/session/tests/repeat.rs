//! `--repeat N` through the real lifecycle on a fake system: N documents, each with its own run id
//! and the user's tags, each export in its own numbered file, each stored; stdout refused.

use punctual_result::doc::kind;
use punctual_result::{Failure, Output, ResultDoc, Series};
use punctual_session::{drive_repeated, numbered, Ctx, Env, Exit, Measurement, Outputs, Report};
use punctual_stats::Recorder;

/// A measurement whose k-th run records one sample of `k + 1` us.
struct Fixed(u64);

impl Measurement for Fixed {
    type Outcome = u64;
    fn label(&self) -> String {
        "fixed".into()
    }
    fn run(&mut self, _ctx: &Ctx) -> Result<u64, Failure> {
        Ok(self.0)
    }
    fn report(&self, v: u64, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        let mut r = Recorder::new();
        r.record(v);
        doc.series
            .push(Series::from_recorder("s", kind::LATENESS, None, &r));
        Ok(Report::default())
    }
}

#[test]
fn repeated_runs_write_numbered_files_and_store_each_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let store = dir.path().join("s.db");
    let out = Outputs::new()
        .json_csv(Some(&Output::File(json.clone())), None)
        .unwrap()
        .store(
            Some(store.to_str().unwrap()),
            vec![("kernel".into(), "a".into())],
        )
        .unwrap()
        .repeated(3)
        .unwrap();
    let env = Env::fake(&["punctual", "latency", "--repeat", "3"]);
    let exit = drive_repeated(3, &out, &env, |k| Fixed(1_000 * (u64::from(k) + 1))).unwrap();
    assert_eq!(exit, Exit::Ok);
    let ids = out.stored_ids();
    assert_eq!(ids.len(), 3, "three results stored");
    let s = punctual_store::Store::open(store.to_str().unwrap()).unwrap();
    for (k, id) in ids.iter().enumerate() {
        let file = numbered(&json, k as u32 + 1);
        let doc = ResultDoc::from_json(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            doc.series[0].summary.max,
            1_000 * (k as u64 + 1),
            "{file:?}"
        );
        assert_eq!(doc.tags.get("kernel").map(String::as_str), Some("a"));
        assert!(doc.run_id.is_some());
        let stored = s.resolve(id).unwrap();
        assert_eq!(
            stored.doc, doc,
            "the file and the store hold the same document"
        );
    }
    assert!(!json.exists(), "no unnumbered file");
    let (shown, _) = env.captured();
    assert!(shown.contains("3 runs stored"), "{shown}");

    // Stdout cannot take three documents.
    let e = Outputs::new()
        .json_csv(Some(&Output::Stdout), None)
        .unwrap()
        .repeated(2)
        .err()
        .expect("--json - with --repeat is refused");
    assert!(e.to_string().contains("--repeat"), "{e}");
    assert_eq!(
        numbered(std::path::Path::new("a/b.json"), 2),
        std::path::Path::new("a/b-2.json")
    );
    assert_eq!(
        numbered(std::path::Path::new("out"), 1),
        std::path::Path::new("out-1")
    );
}
