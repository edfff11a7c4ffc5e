//! The same store in PostgreSQL, against a real server this test starts itself: `initdb` and
//! `pg_ctl` in a temporary directory, listening only on a Unix socket there, stopped by its pid on
//! every path. Skipped (visibly) where the server binaries are absent.

mod common;

use common::doc;
use punctual_result::Class;
use punctual_store::{Access, Filter, Store, StoreError, SCHEMA_VERSION};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn pg_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("initdb").is_file() && b.join("pg_ctl").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}

fn is_root() -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::geteuid() == 0 }
}

/// A server in a temporary directory; dropping it stops the postmaster by pid and waits for it.
struct Server {
    dir: tempfile::TempDir,
    pid: Option<i32>,
}

impl Server {
    fn start(bin: &Path) -> Result<Server, String> {
        let dir = tempfile::Builder::new()
            .prefix("punctual-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let mut server = Server { dir, pid: None };
        let run = |args: &[&str]| -> Result<(), String> {
            // initdb refuses to run as root: as root, run the server tools as the postgres user.
            let mut c = if is_root() {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]);
                c
            } else {
                Command::new(args[0])
            };
            if is_root() {
                c.arg(args[0]);
            }
            let out = c
                .args(&args[1..])
                .output()
                .map_err(|e| format!("{}: {e}", args[0]))?;
            if !out.status.success() {
                return Err(format!(
                    "{} failed: {}{}",
                    args[0],
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(())
        };
        if is_root() {
            let chown = Command::new("chown")
                .args(["postgres:postgres", server.dir.path().to_str().unwrap()])
                .status()
                .map_err(|e| e.to_string())?;
            if !chown.success() {
                return Err("chown postgres failed".into());
            }
        }
        let data = server.dir.path().join("data");
        let socket = server.dir.path().to_str().unwrap().to_string();
        run(&[
            bin.join("initdb").to_str().unwrap(),
            "-D",
            data.to_str().unwrap(),
            "-U",
            "punctual",
            "-A",
            "trust",
            "--no-sync",
        ])?;
        let opts = format!("-k {socket} -c listen_addresses= -c fsync=off -p 5432");
        run(&[
            bin.join("pg_ctl").to_str().unwrap(),
            "-D",
            data.to_str().unwrap(),
            "-o",
            &opts,
            "-l",
            server.dir.path().join("log").to_str().unwrap(),
            "-w",
            "start",
        ])?;
        let pidfile =
            std::fs::read_to_string(data.join("postmaster.pid")).map_err(|e| e.to_string())?;
        server.pid = pidfile.lines().next().and_then(|l| l.trim().parse().ok());
        if server.pid.is_none() {
            return Err("no pid in postmaster.pid".into());
        }
        Ok(server)
    }

    fn url(&self, password: Option<&str>) -> String {
        let user = match password {
            Some(p) => format!("punctual:{p}"),
            None => "punctual".into(),
        };
        format!(
            "postgresql://{user}@/postgres?host={}&port=5432",
            self.dir.path().display()
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(pid) = self.pid else { return };
        // SIGINT: PostgreSQL's fast shutdown (clients disconnected, no wait for them).
        // SAFETY: plain syscall on the pid this test started.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let t = Instant::now();
        // SAFETY: signal 0 only checks whether the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above: signal 0 only checks the process exists.
        if unsafe { libc::kill(pid, 0) } == 0 {
            // SAFETY: as above: a signal to the server this test started, touching no memory.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn postgres_store_round_trips_and_lists_across_hosts() {
    let name = "postgres_store_round_trips_and_lists_across_hosts";
    let Some(bin) = pg_bin() else {
        punctual_testkit::missing(
            name,
            "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)",
        );
        return;
    };
    if is_root()
        && Command::new("id")
            .arg("postgres")
            .output()
            .map_or(true, |o| !o.status.success())
    {
        punctual_testkit::skip(
            name,
            "running as root and there is no postgres user to run initdb as",
        );
        return;
    }
    let server = match Server::start(&bin) {
        Ok(s) => s,
        Err(e) => panic!("starting PostgreSQL: {e}"),
    };
    let secret = "hunter2-secret";
    let url = server.url(Some(secret));
    // A command that only reads finds no store in an empty database, and creates none.
    let e = Store::open_with(&url, Access::Existing).unwrap_err();
    assert!(matches!(e, StoreError::Absent { .. }), "{e}");
    assert!(!e.to_string().contains(secret), "{e}");
    // A command that writes checks the server before its run and creates the schema only with
    // its first result (issue 32: a refused run must leave nothing).
    let planned = punctual_store::Planned::check(Some(&url)).unwrap();
    assert!(!planned.exists());
    assert!(!planned.location().contains(secret));
    let e = Store::open_with(&url, Access::Existing).unwrap_err();
    assert!(
        matches!(e, StoreError::Absent { .. }),
        "the check created the schema: {e}"
    );
    drop(planned);
    // Two machines of a fleet, each with its own connection, creating the schema at once.
    let handles: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|host| {
            let url = url.clone();
            std::thread::spawn(move || {
                let store = Store::open(&url).unwrap();
                (0..5)
                    .map(|i| {
                        let d = doc(
                            &["punctual", "latency"],
                            host,
                            &format!("2026-11-0{}T00:00:00Z", i + 1),
                            &[1_000 * (i + 1)],
                        );
                        let fig = (
                            format!("{host}.svg"),
                            format!("<svg>{host}{i}</svg>").into_bytes(),
                        );
                        let tags = vec![("machine".to_string(), host.to_string())];
                        (
                            store.put(&d, std::slice::from_ref(&fig), &tags).unwrap(),
                            d,
                            fig,
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let stored: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let store = Store::open(&url).unwrap();
    assert!(!store.location().contains(secret), "{}", store.location());
    for (id, d, fig) in &stored {
        let back = store.resolve(id).unwrap();
        assert_eq!(&back.doc, d);
        assert_eq!(back.figures, vec![fig.clone()]);
        let prefix = &id[..8];
        assert_eq!(
            store.resolve(prefix).unwrap().id.as_deref(),
            Some(id.as_str())
        );
    }
    let on = |h: &str| Filter {
        host: Some(h.into()),
        ..Default::default()
    };
    assert_eq!(store.list(&on("alpha")).unwrap().len(), 5);
    assert_eq!(store.list(&on("beta")).unwrap().len(), 5);
    assert_eq!(
        store
            .list(&Filter {
                last: Some(3),
                ..Default::default()
            })
            .unwrap()
            .len(),
        3
    );
    let tagged = Filter {
        tags: vec![("machine".into(), "beta".into())],
        ..Default::default()
    };
    assert!(store
        .list(&tagged)
        .unwrap()
        .iter()
        .all(|e| e.hostname == "beta"));
    let latest = store.resolve("latest").unwrap();
    assert_eq!(latest.doc.started_at, "2026-11-05T00:00:00Z");
    let gone = store.remove(&stored[0].0).unwrap();
    assert!(matches!(
        store.resolve(&gone),
        Err(StoreError::UnknownId { .. })
    ));
    assert_eq!(store.list(&Filter::default()).unwrap().len(), 9);

    // Import is idempotent and tags travel: an export imported back is the same run; a run from
    // elsewhere keeps its id and tags, once.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.json");
    std::fs::write(
        &file,
        store.resolve(&stored[1].0).unwrap().exported().to_json(),
    )
    .unwrap();
    let again = store.import(&file).unwrap();
    assert_eq!(
        (again.id.as_str(), again.new),
        (stored[1].0.as_str(), false)
    );
    let mut other = doc(
        &["punctual", "check"],
        "gamma",
        "2026-11-09T00:00:00Z",
        &[7_000],
    );
    other.run_id = Some(punctual_result::ResultDoc::new_run_id());
    other.tags.insert("kernel".into(), "6.18".into());
    std::fs::write(&file, other.to_json()).unwrap();
    let first = store.import(&file).unwrap();
    assert!(first.new);
    assert_eq!(&first.id[..], &other.run_id.as_deref().unwrap()[..12]);
    assert!(!store.import(&file).unwrap().new);
    assert_eq!(
        store.resolve(&first.id).unwrap().tags,
        vec![("kernel".to_string(), "6.18".to_string())]
    );
    assert_eq!(store.list(&on("gamma")).unwrap().len(), 1);
    migrates_a_schema_1_database(&server);

    // A schema from a newer punctual is refused, and left as it was.
    let mut client = postgres::Client::connect(&server.url(None), postgres::NoTls).unwrap();
    client
        .execute(
            "UPDATE schema_version SET version = $1",
            &[&(SCHEMA_VERSION + 1)],
        )
        .unwrap();
    let e = Store::open(&url).unwrap_err();
    assert!(matches!(e, StoreError::NewerSchema { .. }), "{e}");
    assert!(!e.to_string().contains(secret), "{e}");
    let v: i64 = client
        .query_one("SELECT version FROM schema_version", &[])
        .unwrap()
        .get(0);
    assert_eq!(v, SCHEMA_VERSION + 1);
    drop(client);
    drop(store);

    // The server gone: unreachable is a system error, the password still hidden.
    let dead = server.url(Some(secret));
    drop(server);
    let e = Store::open(&dead).unwrap_err();
    assert!(matches!(e, StoreError::Unreachable { .. }), "{e}");
    assert_eq!(e.class(), Class::System);
    assert!(!e.to_string().contains(secret), "{e}");
}

/// A database holding punctual 0.1's schema (version 1) and one result is migrated: run ids
/// filled in, digests recomputed, so importing the same document finds it.
fn migrates_a_schema_1_database(server: &Server) {
    let mut admin = postgres::Client::connect(&server.url(None), postgres::NoTls).unwrap();
    admin.batch_execute("CREATE DATABASE old").unwrap();
    let url = server.url(None).replace("@/postgres?", "@/old?");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "CREATE TABLE schema_version (version BIGINT NOT NULL);
             INSERT INTO schema_version VALUES (1);
             CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE results (id TEXT PRIMARY KEY, digest TEXT NOT NULL, stored_at TEXT NOT NULL,
               stored_ns BIGINT NOT NULL, started_at TEXT NOT NULL, started_ns BIGINT NOT NULL,
               command TEXT NOT NULL, experiment TEXT, status TEXT NOT NULL, hostname TEXT NOT NULL,
               kernel TEXT NOT NULL, preempt TEXT NOT NULL, cpu_model TEXT NOT NULL,
               virtualized BIGINT NOT NULL, worst_series TEXT, worst_p99_ns BIGINT);
             CREATE TABLE documents (result_id TEXT PRIMARY KEY REFERENCES results (id) ON DELETE CASCADE,
               doc TEXT NOT NULL, tables TEXT);
             CREATE INDEX results_digest ON results (digest);
             CREATE TABLE figures (result_id TEXT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
               name TEXT NOT NULL, media_type TEXT NOT NULL, bytes BYTEA NOT NULL,
               PRIMARY KEY (result_id, name));
             CREATE TABLE tags (result_id TEXT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
               key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (result_id, key));",
        )
        .unwrap();
    let d = doc(
        &["punctual", "latency"],
        "old",
        "2026-01-05T00:00:00Z",
        &[2_000],
    );
    client
        .execute(
            "INSERT INTO results VALUES ('0123456789ab', 'f00d', 'x', 1, '2026-01-05T00:00:00Z', 0, \
             'latency', NULL, 'ok', 'old', 'k', 'p', 'c', 1, NULL, NULL)",
            &[],
        )
        .unwrap();
    client
        .execute(
            "INSERT INTO documents VALUES ('0123456789ab', $1, NULL)",
            &[&serde_json::to_string(&d).unwrap()],
        )
        .unwrap();
    let store = Store::open_with(&url, Access::Existing).unwrap();
    let row = client
        .query_one(
            "SELECT run_id, (SELECT version FROM schema_version) FROM results",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "0123456789ab");
    assert_eq!(row.get::<_, i64>(1), SCHEMA_VERSION);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.json");
    std::fs::write(&file, d.to_json()).unwrap();
    let again = store.import(&file).unwrap();
    assert_eq!((again.id.as_str(), again.new), ("0123456789ab", false));
}
