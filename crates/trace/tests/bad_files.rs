//! A trace file that cannot be read is named in the refusal (found by scripts/bad-input.sh, issue
//! 19): "not a punctual trace file" or "header is damaged" did not say which file.

use punctual_result::Class;
use punctual_trace::measure::Analyze;
use punctual_trace::render::ReportOptions;

#[test]
fn unreadable_trace_files_are_named_in_the_refusal() {
    let d = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("empty.ptf", &b""[..]),
        ("text.ptf", &b"just text\n"[..]),
        ("cut.ptf", &b"PUNCTTRC\x01\x00"[..]),
    ] {
        let path = d.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let m = Analyze {
            file: path.clone(),
            opts: ReportOptions::default(),
            partial: false,
        };
        let Err(e) = m.load() else {
            panic!("{name}: an unreadable trace must be refused");
        };
        assert_eq!(e.class, Class::Usage, "{}", e.message);
        assert!(e.message.contains(name), "{}", e.message);
        // Named once, not twice.
        assert_eq!(e.message.matches(name).count(), 1, "{}", e.message);
    }
}
