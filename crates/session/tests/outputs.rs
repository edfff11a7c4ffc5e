//! Two exports naming one file (found by scripts/bad-input.sh, issue 19): `latency --json F --csv F`
//! measured, then wrote the CSV over the JSON with exit 0. Refused before anything runs.

use punctual_result::Output;
use punctual_session::Outputs;

fn file(p: &std::path::Path) -> Output {
    Output::File(p.to_path_buf())
}

#[test]
fn two_exports_to_the_same_file_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let new = d.path().join("out");
    let e = Outputs::new()
        .json_csv(Some(&file(&new)), Some(&file(&new)))
        .err()
        .expect("--json and --csv to one new file must be refused");
    assert!(
        e.to_string().contains("--json") && e.to_string().contains("--csv"),
        "{e}"
    );

    // The same existing file by two spellings.
    std::fs::write(&new, "keep").unwrap();
    let other = d.path().join(".").join("out");
    assert!(Outputs::new()
        .json_csv(Some(&file(&new)), Some(&file(&other)))
        .is_err());
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "keep");

    // An export and the figure.
    assert!(Outputs::new()
        .json_csv(Some(&file(&new)), None)
        .unwrap()
        .figure_file("--plot", Some(&file(&new)))
        .is_err());
}

#[test]
fn exports_to_different_files_are_accepted() {
    let d = tempfile::tempdir().unwrap();
    assert!(Outputs::new()
        .json_csv(
            Some(&file(&d.path().join("a.json"))),
            Some(&file(&d.path().join("a.csv")))
        )
        .is_ok());
}
