//! `kurt-arts` through the lifecycle: a short stream over a veth pair between namespaces the
//! experiment makes and removes, punctual's replay beside tcpreplay's, received with kernel
//! timestamps in the other namespace. Needs root (namespaces, AF_PACKET) and says SKIPPED without.

use punctual_experiments::kurt_arts::KurtArts;
use punctual_experiments::Options;
use punctual_session::{execute, Env, Exit};

#[test]
fn kurt_arts_sends_every_frame_and_the_receiver_times_each_gap() {
    let test = "kurt_arts_sends_every_frame_and_the_receiver_times_each_gap";
    if !nix::unistd::geteuid().is_root() {
        punctual_testkit::skip(test, "network namespaces and AF_PACKET need root");
        return;
    }
    let before: Vec<String> = netns_list();
    let mut m = KurtArts::new(Options {
        quick: true,
        explain_trace: None,
    });
    m.packets = 200;
    m.spacings = vec![500_000];
    let env = Env::real().capture();
    let done = execute(&mut m, None, &env).expect("the experiment runs");
    assert_eq!(done.exit, Exit::Ok);
    assert_eq!(netns_list(), before, "the namespaces are removed");
    let t = &done.report.tables[0];
    let row = |who: &str| t.rows.iter().find(|r| r.get(1).is_some_and(|c| c == who));
    assert_eq!(row("ARTS (thesis)").unwrap()[7], "99.7 %");
    // Every frame punctual sent arrived, each gap timed.
    assert_eq!(row("punctual").unwrap()[2], "200/200");
    let tcpreplay = std::process::Command::new("tcpreplay")
        .arg("--version")
        .output()
        .is_ok();
    if tcpreplay {
        assert_eq!(row("tcpreplay").unwrap()[2], "200/200");
        assert_eq!(done.doc.series.len(), 2);
    } else {
        punctual_testkit::missing(
            &format!("{test} (tcpreplay half)"),
            "tcpreplay is not installed (apt-get install -y tcpreplay)",
        );
        assert!(row("tcpreplay").is_none());
        assert!(t.notes.iter().any(|n| n.contains("tcpreplay left out")));
    }
    let s = &done.doc.series[0];
    assert_eq!(s.kind, "interval_deviation");
    assert_eq!(s.summary.count, 199, "one error per consecutive pair");
}

fn netns_list() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
